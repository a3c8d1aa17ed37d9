import CLinux
import COpenSSL

#if canImport(Glibc)
  import Glibc
#endif

/// Why TLS could not be set up; one sentence for the operator.
public struct TLSError: Error, CustomStringConvertible, Sendable {
  public let description: String

  /// A problem found outside OpenSSL.
  public init(message: String) { description = message }

  init(_ description: String) {
    var detail = ""
    let code = ERR_get_error()
    if code != 0 {
      var buffer = [CChar](repeating: 0, count: 256)
      ERR_error_string_n(code, &buffer, buffer.count)
      detail =
        " (" + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + ")"
    }
    ERR_clear_error()
    self.description = description + detail
  }
}

/// A server TLS configuration: one certificate and key, TLS 1.2 and 1.3 only, Mozilla's
/// "intermediate" ciphers and groups (the server's cipher order for TLS 1.2, the client's for 1.3),
/// session tickets, ALPN `http/1.1` (or `http/1.0`; a client offering only other protocols gets
/// the fatal `no_application_protocol` alert, a client offering none is served). Built once per snapshot; connections made from it keep it alive.
// Safe to share unchecked: the SSL_CTX is fully configured in init and never changed afterwards;
// OpenSSL documents SSL_new on a configured SSL_CTX as safe from several threads at once, and the
// context is freed only in deinit, when no connection (each holds a reference) can use it.
public final class TLSContext: @unchecked Sendable {
  let context: OpaquePointer
  let certificatePath: String
  let keyPath: String
  /// Contexts for further certificates, chosen by the client's SNI name (RFC 6066 §3).
  private(set) var alternatives: [TLSContext] = []

  /// Mozilla intermediate (TLS 1.2 part; TLS 1.3 suites are OpenSSL's defaults, all acceptable).
  static let ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    + "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"
  static let groups = "X25519:prime256v1:secp384r1"

  /// Whether ALPN offers `h2` (before `http/1.1`).
  public let http2: Bool

  /// A context serving the PEM certificate chain at `certificate` with the key at `key`; with
  /// `http2`, ALPN offers `h2` too.
  public init(certificate: String, key: String, http2: Bool = false) throws(TLSError) {
    certificatePath = certificate
    keyPath = key
    self.http2 = http2
    guard let context = SSL_CTX_new(TLS_server_method()) else {
      throw TLSError("cannot create a TLS context")
    }
    self.context = context
    guard SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1,
      SSL_CTX_ctrl(context, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_3_VERSION), nil) == 1,
      SSL_CTX_set_cipher_list(context, Self.ciphers) == 1,
      Self.groups.withCString({
        SSL_CTX_ctrl(context, SSL_CTRL_SET_GROUPS_LIST, 0, UnsafeMutableRawPointer(mutating: $0))
      })
        == 1
    else { throw TLSError("cannot apply the TLS protocol and cipher settings") }
    // SSL_OP_NO_RENEGOTIATION is SSL_OP_BIT(30), macros Swift cannot import. The server's cipher
    // order applies to TLS 1.2 (testssl.sh counts a client-chosen order there as a weakness, and
    // OpenSSL keeps a client's preference for ChaCha20: SSL_OP_PRIORITIZE_CHACHA); every TLS 1.3
    // suite is strong, so there the client chooses, as Mozilla's configurations do.
    _ = SSL_CTX_set_options(context, UInt64(1) << 30 | Self.serverPreference | UInt64(1) << 21)
    SSL_CTX_set_client_hello_cb(
      context,
      { ssl, _, _ in
        if let ssl, TLSContext.offersTLS13(ssl) { _ = SSL_clear_options(ssl, TLSContext.serverPreference) }
        return SSL_CLIENT_HELLO_SUCCESS
      }, nil)
    // Release buffers (as nginx does): a connection's read and write record buffers (17 KiB each)
    // are freed whenever they hold nothing and set up again for the next burst, so an idle
    // connection keeps neither: 9 to 12 KiB less resident each (24 -> 15 KiB for idle HTTP/1.1 over TLS,
    // 50 -> 38 for idle h2). The cost is a malloc and a free per read or write burst, far below
    // the record's encryption.
    _ = SSL_CTX_ctrl(
      context, SSL_CTRL_MODE,
      Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS), nil
    )
    // Read ahead: one read syscall takes every record that has arrived, instead of one for each
    // record's header and another for its body.
    _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_READ_AHEAD, 1, nil)
    // One TLS 1.3 session ticket per handshake (OpenSSL sends two by default): one is what a
    // client resumes with, and each costs an encryption on every new connection.
    _ = SSL_CTX_set_num_tickets(context, 1)
    guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
      throw TLSError("cannot read the certificate chain \(certificate)")
    }
    guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1 else {
      throw TLSError("cannot read the private key \(key)")
    }
    guard SSL_CTX_check_private_key(context) == 1 else {
      throw TLSError("the private key \(key) does not match the certificate \(certificate)")
    }
    SSL_CTX_set_alpn_select_cb(
      context,
      { _, out, outLength, offered, offeredLength, arg in
        guard let offered, let out, let outLength else { return SSL_TLSEXT_ERR_NOACK }
        guard
          let (start, length) = TLSContext.selectProtocol(
            UnsafeBufferPointer(start: offered, count: Int(offeredLength)), http2: arg != nil)
        else {
          // RFC 7301 §3.2: none of the client's protocols is spoken here: no_application_protocol.
          return SSL_TLSEXT_ERR_ALERT_FATAL
        }
        out.pointee = offered + start
        outLength.pointee = UInt8(length)
        return SSL_TLSEXT_ERR_OK
      },
      // The argument only says whether h2 is offered: any non-null pointer, never dereferenced.
      http2 ? UnsafeMutableRawPointer(bitPattern: 1) : nil)
  }

  /// When the default certificate stops being valid (its `notAfter`), in seconds since 1970; nil
  /// if it cannot be read. With SNI alternatives, the earliest of them all.
  public var certificateNotAfter: Int? {
    var earliest: Int? = nil
    for ctx in [context] + alternatives.map(\.context) {
      guard let certificate = SSL_CTX_get0_certificate(ctx), let time = X509_get0_notAfter(certificate) else {
        continue
      }
      var moment = tm()
      guard ASN1_TIME_to_tm(time, &moment) == 1 else { continue }
      let seconds = timegm(&moment)
      earliest = min(earliest ?? seconds, seconds)
    }
    return earliest
  }

  /// The protocols this server speaks, best first (nginx offers the same HTTP/1 names); `h2` first
  /// when HTTP/2 is on.
  static let protocols: [[UInt8]] = [Array("http/1.1".utf8), Array("http/1.0".utf8)]
  static let h2 = Array("h2".utf8)

  /// The best protocol of `protocols` (and `h2` first when `http2`) in a client's ALPN list (RFC
  /// 7301 §3.1: length-prefixed names), as offset and length in the list; nil when the client
  /// offers none of them.
  static func selectProtocol(_ offered: UnsafeBufferPointer<UInt8>, http2: Bool = false) -> (Int, Int)? {
    var names: [(Int, Int)] = []
    var i = 0
    while i < offered.count {
      let length = Int(offered[i])
      guard length > 0, i + 1 + length <= offered.count else { return nil }
      names.append((i + 1, length))
      i += 1 + length
    }
    for wanted in (http2 ? [h2] : []) + protocols {
      if let hit = names.first(where: { start, length in
        length == wanted.count && offered[start..<(start + length)].elementsEqual(wanted)
      }) {
        return hit
      }
    }
    return nil
  }

  deinit { SSL_CTX_free(context) }

  /// SSL_OP_CIPHER_SERVER_PREFERENCE (SSL_OP_BIT(22)).
  static let serverPreference = UInt64(1) << 22

  /// Whether the ClientHello lists TLS 1.3 in supported_versions (RFC 8446 §4.2.1), which this
  /// server then negotiates.
  static func offersTLS13(_ ssl: OpaquePointer) -> Bool {
    var data: UnsafePointer<UInt8>?
    var length = 0
    guard SSL_client_hello_get0_ext(ssl, 43, &data, &length) == 1, let data, length >= 1 else { return false }
    let versions = UnsafeBufferPointer(start: data + 1, count: min(Int(data[0]), length - 1))
    return stride(from: 0, to: versions.count - 1, by: 2).contains {
      versions[$0] == 3 && versions[$0 + 1] == 4
    }
  }

  /// recv/send on the connection's socket, through its `TLSWire` (the BIO's data pointer).
  // Created once; BIO_METHOD is read-only after these calls.
  nonisolated(unsafe) static let socketMethod: OpaquePointer? = {
    guard let method = BIO_meth_new(BIO_TYPE_SOURCE_SINK | BIO_get_new_index(), "edge socket") else {
      return nil
    }
    BIO_meth_set_read(method) { bio, buffer, length in
      let wire = BIO_get_data(bio).assumingMemoryBound(to: TLSWire.self)
      BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
      let n = recv(wire.pointee.fd, buffer, Int(length), 0)
      wire.pointee.drained = n > 0 && n < Int(length)
      if n < 0 && (errno == EAGAIN || errno == EINTR) {
        BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
      }
      return Int32(n)
    }
    BIO_meth_set_write(method) { bio, buffer, length in
      let wire = BIO_get_data(bio).assumingMemoryBound(to: TLSWire.self)
      BIO_clear_flags(bio, BIO_FLAGS_WRITE | BIO_FLAGS_SHOULD_RETRY)
      guard let buffer, length > 0 else { return 0 }
      let n = wire.pointee.write(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
      if n < 0 && (errno == EAGAIN || errno == EINTR) {
        BIO_set_flags(bio, BIO_FLAGS_WRITE | BIO_FLAGS_SHOULD_RETRY)
      }
      return Int32(n)
    }
    BIO_meth_set_ctrl(method) { _, command, _, _ in
      // FLUSH (the loop sends batches itself) and DUP succeed; everything else is unsupported.
      command == BIO_CTRL_FLUSH || command == BIO_CTRL_DUP ? 1 : 0
    }
    return method
  }()

  /// A context for several certificate/key pairs: the first is the default; a client naming a host
  /// (SNI) that another certificate covers gets that one.
  public convenience init(pairs: [(certificate: String, key: String)], http2: Bool = false) throws(TLSError) {
    guard let first = pairs.first else { throw TLSError(message: "TLS needs a certificate and a key") }
    try self.init(certificate: first.certificate, key: first.key, http2: http2)
    for pair in pairs.dropFirst() {
      alternatives.append(try TLSContext(certificate: pair.certificate, key: pair.key, http2: http2))
    }
    guard !alternatives.isEmpty else { return }
    _ = SSL_CTX_ctrl(
      context, SSL_CTRL_SET_TLSEXT_SERVERNAME_ARG, 0, Unmanaged.passUnretained(self).toOpaque())
    let pick:
      @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?, UnsafeMutableRawPointer?) -> Int32 = {
        ssl, _, arg in
        // The arg is this context, kept alive by every connection made from it.
        guard let ssl, let arg, let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else {
          return SSL_TLSEXT_ERR_OK
        }
        let primary = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
        let host = String(cString: name)
        if primary.covers(host: host) { return SSL_TLSEXT_ERR_OK }
        if let match = primary.alternatives.first(where: { $0.covers(host: host) }) {
          _ = SSL_set_SSL_CTX(ssl, match.context)
        }
        return SSL_TLSEXT_ERR_OK
      }
    _ = SSL_CTX_callback_ctrl(
      context, SSL_CTRL_SET_TLSEXT_SERVERNAME_CB, unsafeBitCast(pick, to: (@convention(c) () -> Void).self))
  }

  /// Whether this context or one of its alternatives covers `host`.
  public func coversAny(host: String) -> Bool {
    covers(host: host) || alternatives.contains { $0.covers(host: host) }
  }

  /// The same configuration with fresh session-ticket keys (OpenSSL makes them per context): tickets
  /// issued before no longer resume, which bounds how long a stolen ticket key is useful. Nil when the
  /// files no longer load or now hold another certificate (that takes a SIGHUP, which validates it).
  public func withFreshTicketKeys() -> TLSContext? {
    let pairs = [(certificatePath, keyPath)] + alternatives.map { ($0.certificatePath, $0.keyPath) }
    guard let fresh = try? TLSContext(pairs: pairs.map { (certificate: $0.0, key: $0.1) }, http2: http2)
    else {
      return nil
    }
    for (a, b) in zip([self] + alternatives, [fresh] + fresh.alternatives) {
      guard let old = SSL_CTX_get0_certificate(a.context), let new = SSL_CTX_get0_certificate(b.context),
        X509_cmp(old, new) == 0
      else { return nil }
    }
    return fresh
  }

  /// Whether the certificate covers `host` (a DNS name or an IP literal; RFC 6125 matching).
  public func covers(host: String) -> Bool {
    guard let certificate = SSL_CTX_get0_certificate(context) else { return false }
    if host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) {
      return X509_check_ip_asc(certificate, host, 0) == 1
    }
    return X509_check_host(certificate, host, host.utf8.count, 0, nil) == 1
  }

  /// A server-side TLS session on `fd` (accept state).
  func session(fd: Int32) -> TLSSession? {
    guard let ssl = SSL_new(context) else { return nil }
    guard let bio = BIO_new(Self.socketMethod) else {
      SSL_free(ssl)
      return nil
    }
    let session = TLSSession(ssl: ssl, context: self, fd: fd)
    BIO_set_data(bio, UnsafeMutableRawPointer(session.wire))
    BIO_set_init(bio, 1)
    SSL_set_bio(ssl, bio, bio)
    SSL_set_accept_state(ssl)
    return session
  }
}

/// Where one connection's TLS records go. Outside a batch, straight to the socket (recv/send skip
/// the VFS path that read/write take). Inside one, into the loop's batch buffer, which the loop then
/// sends with one call: a 60 KB response is four records, and four sends would be four trips
/// through the TCP stack and four wake-ups of the client. Ciphertext the socket did not take waits
/// in `pending` and goes before anything else; while it waits, every write is refused (retry), so
/// records never change order.
struct TLSWire {
  let fd: Int32
  /// The last read was short: the socket held less than OpenSSL asked for, so it is empty now
  /// and the next arrival raises a new edge.
  var drained = false
  private var batch: UnsafeMutableRawBufferPointer?
  private(set) var batched = 0
  private var pending: UnsafeMutableRawBufferPointer?
  private var pendingSent = 0

  init(fd: Int32) { self.fd = fd }

  var hasPending: Bool { pending != nil }

  /// Records written from now on are collected in `buffer` (the loop's; not kept past `endBatch`).
  mutating func beginBatch(_ buffer: UnsafeMutableRawBufferPointer) {
    batch = buffer
    batched = 0
  }

  /// What OpenSSL writes: taken whole into the batch if it fits, refused (EAGAIN) if not, so that
  /// the loop sends the batch and OpenSSL offers the record again; sent directly outside a batch.
  mutating func write(_ record: UnsafeRawBufferPointer) -> Int {
    guard pending == nil else {
      errno = EAGAIN
      return -1
    }
    if let batch {
      if batched + record.count <= batch.count {
        UnsafeMutableRawBufferPointer(rebasing: batch[batched...]).copyMemory(from: record)
        batched += record.count
        return record.count
      }
      if batched > 0 {
        errno = EAGAIN
        return -1
      }
    }
    return Glibc.send(fd, record.baseAddress, record.count, Int32(MSG_NOSIGNAL))
  }

  /// Ends the batch and sends it; what the socket does not take becomes `pending`. False on a
  /// socket error.
  mutating func endBatch() -> Bool {
    guard let batch else { return true }
    self.batch = nil
    guard let sent = Self.send(fd, UnsafeRawBufferPointer(rebasing: batch[0..<batched])) else { return false }
    if sent < batched {
      let rest = UnsafeMutableRawBufferPointer.allocate(byteCount: batched - sent, alignment: 1)
      rest.copyMemory(from: UnsafeRawBufferPointer(rebasing: batch[sent..<batched]))
      pending = rest
      pendingSent = 0
    }
    return true
  }

  /// Sends what an earlier batch left: true when nothing is left, false when the socket is full,
  /// nil on a socket error.
  mutating func sendPending() -> Bool? {
    guard let pending else { return true }
    guard let sent = Self.send(fd, UnsafeRawBufferPointer(rebasing: pending[pendingSent...])) else {
      return nil
    }
    pendingSent += sent
    guard pendingSent == pending.count else { return false }
    pending.deallocate()
    self.pending = nil
    return true
  }

  /// Sends `bytes` until all are sent or the socket is full: how many went, nil on a socket error.
  private static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int? {
    var sent = 0
    while sent < bytes.count {
      let n = Glibc.send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
      if n > 0 {
        sent += n
      } else if n < 0 && errno == EINTR {
        continue
      } else if n < 0 && errno == EAGAIN {
        break
      } else {
        return nil
      }
    }
    return sent
  }

  /// Frees what is left unsent (the connection is closing).
  mutating func discard() {
    pending?.deallocate()
    pending = nil
  }
}

/// One connection's TLS state; owned by its loop's thread like the connection itself.
final class TLSSession {
  let ssl: OpaquePointer
  /// Keeps the context (and its certificate) alive for this connection, across reloads.
  let context: TLSContext
  /// The BIO's data: stays at this address for the session's life.
  let wire: UnsafeMutablePointer<TLSWire>
  var handshakeDone = false
  /// Plaintext bytes whose records sit in `wire`'s pending ciphertext: the connection learns they
  /// are written only when the socket has taken them.
  var unreported = 0

  init(ssl: OpaquePointer, context: TLSContext, fd: Int32) {
    self.ssl = ssl
    self.context = context
    wire = .allocate(capacity: 1)
    wire.initialize(to: TLSWire(fd: fd))
  }

  deinit {
    SSL_free(ssl)
    wire.pointee.discard()
    wire.deinitialize(count: 1)
    wire.deallocate()
  }

  /// What a non-blocking TLS call asked for.
  enum Outcome {
    case bytes(Int)
    case wantRead
    case wantWrite
    case closed
    case failed
  }

  func outcome(_ result: Int32) -> Outcome {
    if result > 0 { return .bytes(Int(result)) }
    let error = SSL_get_error(ssl, result)
    ERR_clear_error()
    switch error {
    case SSL_ERROR_WANT_READ: return .wantRead
    case SSL_ERROR_WANT_WRITE: return .wantWrite
    case SSL_ERROR_ZERO_RETURN: return .closed
    case SSL_ERROR_SYSCALL where errno == 0 || errno == EAGAIN: return result == 0 ? .closed : .wantRead
    default: return .failed
    }
  }

  /// Whether ALPN chose `h2` (once the handshake is done).
  var negotiatedH2: Bool {
    var data: UnsafePointer<UInt8>?
    var length: UInt32 = 0
    SSL_get0_alpn_selected(ssl, &data, &length)
    guard let data, length == 2 else { return false }
    return data[0] == UInt8(ascii: "h") && data[1] == UInt8(ascii: "2")
  }

  /// The version's index in the TLS handshakes family's `version` label (once the handshake is done).
  var metricVersion: Int { SSL_version(ssl) == TLS1_3_VERSION ? 1 : 0 }

  /// Whether the handshake resumed an earlier session (a ticket or the session cache).
  var resumed: Bool { SSL_session_reused(ssl) == 1 }

  func handshake() -> Outcome {
    let result = SSL_do_handshake(ssl)
    if result == 1 {
      handshakeDone = true
      return .bytes(0)
    }
    return outcome(result)
  }

  /// Whether OpenSSL holds bytes already read from the socket (a record, or part of one).
  var hasBufferedInput: Bool { SSL_has_pending(ssl) == 1 }

  func read(_ buffer: UnsafeMutableRawBufferPointer) -> Outcome {
    outcome(SSL_read(ssl, buffer.baseAddress, Int32(buffer.count)))
  }

  func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    outcome(SSL_write(ssl, bytes.baseAddress, Int32(min(bytes.count, Int(Int32.max)))))
  }

  /// Sends close_notify (best effort, non-blocking).
  func shutdown() { _ = SSL_shutdown(ssl) }
}
