import CLinux
import Glibc
import Testing

@testable import Edge

/// The transport layer under the protocols. A plain socket's reads say when they drained
/// it (edge-triggered epoll raises no new edge until more arrives) and tell EOF from "nothing now".
@Suite("Transport")
struct TransportTests {
  /// A non-blocking connected pair: the server's end and the client's.
  static func pair() -> (server: Int32, client: Int32) {
    var fds: [Int32] = [0, 0]
    let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
    precondition(made == 0, "socketpair")
    _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
    return (fds[0], fds[1])
  }

  enum Peer: CaseIterable {
    case sendsShort, sendsNothing, closes
  }

  @Test("a plain read: bytes (drained when short), nothing now, or the end", arguments: Peer.allCases)
  func plainRead(peer: Peer) {
    let (server, client) = Self.pair()
    defer { close(server) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
    defer { buffer.deallocate() }
    switch peer {
    case .sendsShort: _ = "GET /".withCString { send(client, $0, 5, 0) }
    case .sendsNothing: break
    case .closes: close(client)
    }
    let transport = PlainTransport(fd: server)
    #expect(transport.mayRead(readable: true, peerHungUp: false))
    #expect(!transport.mayRead(readable: false, peerHungUp: true))
    switch (peer, transport.read(into: buffer)) {
    case (.sendsShort, .bytes(let n, let drained)):
      #expect(n == 5 && drained)
      #expect(Array(buffer[0..<5]) == Array("GET /".utf8))
    case (.sendsNothing, .wouldBlock), (.closes, .ended): break
    case (_, let outcome): Issue.record("unexpected \(outcome) for \(peer)")
    }
    if peer != .closes { close(client) }
  }

  @Test("a full read is not taken for a drained socket")
  func fullRead() {
    let (server, client) = Self.pair()
    defer {
      close(server)
      close(client)
    }
    let bytes = [UInt8](repeating: 0x41, count: 100)
    _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
    defer { buffer.deallocate() }
    guard case .bytes(64, let drained) = PlainTransport(fd: server).read(into: buffer) else {
      Issue.record("expected 64 bytes")
      return
    }
    #expect(!drained)
  }
}
