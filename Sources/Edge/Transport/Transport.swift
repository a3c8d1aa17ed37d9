import CLinux
import Glibc

/// The byte stream under a connection's protocol: the socket itself (`PlainTransport`) or TLS over
/// it (`TLSTransport`). The loop drives every connection the same way — `open` until ready, then
/// `flush` and `read` — and the protocol above (the HTTP/1 machine or HTTP/2) sees only plaintext.
/// ALPN's choice comes out of `open`. Owned by the connection's loop.
protocol Transport {
  /// Gets the stream ready: nothing to do for a plain socket; for TLS, the first byte's check and
  /// the handshake.
  func open(_ buffers: TransportBuffers) -> TransportOpening
  /// Whether a read may find bytes: the socket was not drained, or the transport holds some.
  func mayRead(readable: Bool, peerHungUp: Bool) -> Bool
  /// Reads plaintext into `buffer`.
  func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead
  /// Writes what `connection` has queued, calling `wrote` with each count the socket has taken
  /// (false from it: the connection was closed, stop).
  func flush(_ connection: Connection, _ buffers: TransportBuffers, wrote: (Int) -> Bool) -> TransportFlush
  /// Ends the write side politely (TLS: close_notify first, so the client knows the answer is whole).
  func shutdownWrite()
}

/// What `Transport.open` found.
enum TransportOpening {
  /// Ready for the protocol; `h2` when ALPN chose it.
  case ready(h2: Bool)
  /// Waiting for the socket (the next event continues).
  case waiting
  /// The connection cannot go on.
  case failed
  /// A TLS listener's client spoke plain HTTP first: these bytes, still on the socket.
  case plainText(UnsafeRawBufferPointer)
}

/// What `Transport.read` got.
enum TransportRead {
  /// `count` plaintext bytes; `drained` when the socket is now empty (the next arrival raises a
  /// new edge).
  case bytes(Int, drained: Bool)
  /// Nothing now.
  case wouldBlock
  /// The peer ended its side (EOF, or TLS close_notify).
  case ended
  case failed
}

/// What `Transport.flush` did.
enum TransportFlush {
  /// Everything queued was taken, or the socket is full (the next event continues).
  case done
  /// `wrote` closed the connection.
  case closed
  /// A socket or TLS error: the connection must close.
  case failed
}

/// Scratch memory of one loop, shared by its connections' transports (one runs at a time).
struct TransportBuffers {
  /// Where reads land.
  let read: UnsafeMutableRawBufferPointer
  /// Where queued pieces are gathered into one TLS record (OpenSSL has no gather write).
  let record: UnsafeMutableRawBufferPointer
  /// Where a connection's records are collected for one send: four full records of any suite
  /// (16 KiB of plaintext plus at most 29 bytes of header, nonce, type and tag each).
  let batch: UnsafeMutableRawBufferPointer

  static let readSize = 65536
  static let recordSize = 16384
  static let batchSize = 4 * (16384 + 64)

  /// Buffers for a loop; the TLS ones only when it has TLS listeners.
  static func allocate(tls: Bool) -> TransportBuffers {
    TransportBuffers(
      read: .allocate(byteCount: readSize, alignment: 16),
      record: .allocate(byteCount: tls ? recordSize : 0, alignment: 16),
      batch: .allocate(byteCount: tls ? batchSize : 0, alignment: 16))
  }

  func deallocate() {
    read.deallocate()
    record.deallocate()
    batch.deallocate()
  }
}

/// A plain TCP socket: recv and send (or sendmsg), which skip the VFS path that read and write take.
struct PlainTransport: Transport {
  let fd: Int32

  func open(_ buffers: TransportBuffers) -> TransportOpening { .ready(h2: false) }

  func mayRead(readable: Bool, peerHungUp: Bool) -> Bool { readable }

  func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead {
    while true {
      let n = recv(fd, buffer.baseAddress, buffer.count, 0)
      if n > 0 { return .bytes(n, drained: n < buffer.count) }
      if n == 0 { return .ended }
      switch errno {
      case EINTR: continue
      case EAGAIN: return .wouldBlock
      default: return .failed
      }
    }
  }

  func flush(_ connection: Connection, _ buffers: TransportBuffers, wrote: (Int) -> Bool) -> TransportFlush {
    while connection.pendingOutput > 0 {
      let n = connection.withOutput(skipping: 0) { Self.send(fd, $0) }
      if n > 0 {
        guard wrote(n) else { return .closed }
      } else if n < 0 && errno == EINTR {
        continue
      } else if n < 0 && errno == EAGAIN {
        return .done
      } else {
        return .failed
      }
    }
    return .done
  }

  func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

  /// send for one segment, sendmsg for several; MSG_NOSIGNAL turns a closed peer into EPIPE rather
  /// than a signal.
  private static func send(_ fd: Int32, _ vectors: UnsafeBufferPointer<iovec>) -> Int {
    let flags = Int32(MSG_NOSIGNAL)
    if vectors.count == 1 { return Glibc.send(fd, vectors[0].iov_base, vectors[0].iov_len, flags) }
    var message = msghdr()
    message.msg_iov = UnsafeMutablePointer(mutating: vectors.baseAddress)
    message.msg_iovlen = vectors.count
    return sendmsg(fd, &message, flags)
  }
}

/// TLS over the socket. Edge-triggered epoll delivers both directions, so a TLS call that wants
/// the other direction simply waits for the next event; decrypted bytes OpenSSL still holds are
/// read before the socket is.
final class TLSTransport: Transport {
  let session: TLSSession
  /// Whether the first byte was looked at (a record, not plain HTTP): a failure after it is a
  /// failed handshake, not a peer that left without a word.
  private(set) var firstByteChecked = false

  init(_ session: TLSSession) { self.session = session }

  func open(_ buffers: TransportBuffers) -> TransportOpening {
    let wire = session.wire
    let fd = wire.pointee.fd
    if !firstByteChecked {
      var first: UInt8 = 0
      var n: Int
      repeat { n = recv(fd, &first, 1, Int32(MSG_PEEK)) } while n < 0 && errno == EINTR
      if n < 0 && errno == EAGAIN { return .waiting }
      guard n == 1 else { return .failed }
      firstByteChecked = true
      // RFC 8446 §5.1: a TLS client starts with a handshake record (type 22); a set high bit is an
      // old-style hello, which OpenSSL refuses itself. Anything else is most likely plain HTTP:
      // the loop answers it in the clear, like nginx, and closes.
      if first != 0x16 && first & 0x80 == 0 {
        // What has arrived so far, left on the socket: its target may show the answer's shape.
        repeat {
          n = recv(fd, buffers.read.baseAddress, buffers.read.count, Int32(MSG_PEEK))
        } while n < 0 && errno == EINTR
        return .plainText(UnsafeRawBufferPointer(rebasing: buffers.read[0..<max(n, 0)]))
      }
    }
    while !session.handshakeDone {
      guard let flushed = wire.pointee.sendPending() else { return .failed }
      guard flushed else { return .waiting }
      // The server's flight (hello, certificate, finished; then the session ticket) as one send.
      wire.pointee.beginBatch(buffers.batch)
      let outcome = session.handshake()
      let batched = wire.pointee.batched > 0
      guard wire.pointee.endBatch() else { return .failed }
      switch outcome {
      case .bytes: break
      case .wantWrite where batched && !wire.pointee.hasPending:
        continue  // the batch was full and is sent: OpenSSL writes the rest now
      case .wantRead, .wantWrite: return .waiting
      case .closed, .failed: return .failed
      }
    }
    return .ready(h2: session.negotiatedH2)
  }

  /// As for plain sockets, a short read drained the socket: a read now would only say EAGAIN (one
  /// syscall per request saved), unless OpenSSL still holds input or the peer hung up.
  func mayRead(readable: Bool, peerHungUp: Bool) -> Bool {
    readable || peerHungUp || session.hasBufferedInput
  }

  func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead {
    switch session.read(buffer) {
    case .bytes(let n): return .bytes(n, drained: session.wire.pointee.drained)
    case .wantRead, .wantWrite: return .wouldBlock
    case .closed: return .ended
    case .failed: return .failed
    }
  }

  /// Pieces are gathered into records of up to 16 KiB (a response head and its body go out as one
  /// record, not two); a piece of a full record's size or more is encrypted from where it lies.
  /// Records are batched (`TLSWire`) and sent four at a time; the protocol hears that bytes are
  /// written only once the socket has taken their records, so its write deadline and its closing
  /// wait for the ciphertext. After a refused write OpenSSL is offered the same bytes again, as it
  /// requires.
  func flush(_ connection: Connection, _ buffers: TransportBuffers, wrote: (Int) -> Bool) -> TransportFlush {
    let wire = session.wire
    switch wire.pointee.sendPending() {
    case nil:
      return .failed
    case false?:
      return .done
    case true?:
      if session.unreported > 0 {
        let written = session.unreported
        session.unreported = 0
        guard wrote(written) else { return .closed }
      }
    }
    let record = buffers.record
    while true {
      var taken = 0
      var blocked = false
      wire.pointee.beginBatch(buffers.batch)
      collect: while taken < connection.pendingOutput {
        let outcome = connection.withOutput(skipping: taken) { vectors in
          if vectors[0].iov_len >= TransportBuffers.recordSize || vectors.count == 1 {
            return session.write(
              UnsafeRawBufferPointer(start: vectors[0].iov_base, count: vectors[0].iov_len))
          }
          var filled = 0
          for vector in vectors where filled < TransportBuffers.recordSize {
            let take = min(vector.iov_len, TransportBuffers.recordSize - filled)
            record.baseAddress!.advanced(by: filled).copyMemory(from: vector.iov_base!, byteCount: take)
            filled += take
          }
          return session.write(UnsafeRawBufferPointer(rebasing: record[0..<filled]))
        }
        switch outcome {
        case .bytes(let n):
          taken += n
        case .wantWrite:
          break collect  // the batch is full (or the socket is)
        case .wantRead:
          blocked = true
          break collect
        case .closed, .failed:
          _ = wire.pointee.endBatch()
          return .failed
        }
      }
      let sentSomething = wire.pointee.batched > 0
      guard wire.pointee.endBatch() else { return .failed }
      if wire.pointee.hasPending {
        session.unreported = taken
        return .done
      }
      if taken > 0 {
        guard wrote(taken) else { return .closed }
      }
      if blocked || !sentSomething || connection.pendingOutput == 0 { return .done }
    }
  }

  func shutdownWrite() {
    session.shutdown()
    shutdown(session.wire.pointee.fd, Int32(SHUT_WR))
  }
}
