import CLinux
import Foundation
import Glibc
import Synchronization

@testable import Edge

/// A small blocking HTTP/1.1 server on a thread, standing in for an API core: it reads each
/// request (head, and a body of its Content-Length), records it, and answers with what `script`
/// returns for it: bytes to write (the connection stays open for the next request), or nil to
/// close the connection without a word. An answer with `connection: close` or `x-stub-close` in it
/// closes the connection once written (the second without telling the client: a stale keep-alive).
final class StubUpstream: Sendable {
  /// One request as received, and the connection (numbered from 1) it came on.
  struct Received: Sendable {
    let connection: Int
    let bytes: [UInt8]
    var text: String { String(decoding: bytes, as: UTF8.self) }
  }

  let listener: Int32
  let address: UpstreamEndpoint.Address
  private let path: String?
  private let state = Mutex<(requests: [Received], connections: Int, closed: Int, accepting: Bool)>(
    ([], 0, 0, true))
  private let script: @Sendable (_ request: Received, _ index: Int) -> [UInt8]?

  /// A stub on 127.0.0.1 (a free port), or on a Unix socket when `unix`.
  init(unix: Bool = false, script: @escaping @Sendable (_ request: Received, _ index: Int) -> [UInt8]?) throws
  {
    self.script = script
    if unix {
      let path =
        NSTemporaryDirectory() + "band-edge-stub-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
      let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
      var address = sockaddr_un()
      address.sun_family = sa_family_t(AF_UNIX)
      withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: Array(path.utf8) + [0])
      }
      let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
      }
      guard bound == 0, listen(fd, 16) == 0 else { throw SystemError("bind") }
      listener = fd
      self.path = path
      self.address = .unix(path: path)
    } else {
      let fd = try Listener.open(.v4(host: "127.0.0.1", port: 0), backlog: 16)
      // Listener sockets are non-blocking: the stub's accept blocks.
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
      listener = fd
      path = nil
      address = .tcp(.v4(host: "127.0.0.1", port: Listener.boundPort(fd)))
    }
    let thread = Thread { [self] in serve() }
    thread.start()
  }

  /// Stops accepting (connections already open are left to the test's end). The accepting thread
  /// closes the listener itself, and this waits for it: a descriptor closed under a thread that
  /// is about to call `accept` could be a later test's listener by then.
  func stop() {
    shutdown(listener, Int32(SHUT_RDWR))
    while state.withLock({ $0.accepting }) { usleep(1000) }
    if let path { unlink(path) }
  }

  var requests: [Received] { state.withLock { $0.requests } }
  var connections: Int { state.withLock { $0.connections } }
  /// Connections the stub has closed.
  var closed: Int { state.withLock { $0.closed } }

  private func serve() {
    while true {
      let fd = accept(listener, nil, nil)
      guard fd >= 0 else {
        close(listener)
        state.withLock { $0.accepting = false }
        return
      }
      let number = state.withLock { s -> Int in
        s.connections += 1
        return s.connections
      }
      Thread { [self] in converse(fd, number) }.start()
    }
  }

  private func converse(_ fd: Int32, _ number: Int) {
    defer {
      close(fd)
      state.withLock { $0.closed += 1 }
    }
    var pending: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      while Self.requestLength(pending) == nil {
        let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return }
        pending += chunk[0..<n]
      }
      guard let length = Self.requestLength(pending) else { return }
      let request = Received(connection: number, bytes: Array(pending[0..<length]))
      pending.removeFirst(length)
      let index = state.withLock { s -> Int in
        s.requests.append(request)
        return s.requests.count - 1
      }
      guard let answer = script(request, index) else { return }
      _ = answer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      let text = String(decoding: answer, as: UTF8.self).lowercased()
      if text.contains("connection: close") || text.contains("x-stub-close") { return }
    }
  }

  /// The length of the first whole request in `bytes` (head and Content-Length body), or nil.
  static func requestLength(_ bytes: [UInt8]) -> Int? {
    let end = Array("\r\n\r\n".utf8)
    guard bytes.count >= 4,
      let at = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<($0 + 4)]) == end })
    else { return nil }
    let head = String(decoding: bytes[0..<at], as: UTF8.self).lowercased()
    let length =
      head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
      .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
    return bytes.count >= at + 4 + length ? at + 4 + length : nil
  }

  /// A response with `status` and `body`, kept alive.
  static func answer(_ status: Int = 200, _ body: String = "ok", extra: String = "") -> [UInt8] {
    Array("HTTP/1.1 \(status) X\r\ncontent-length: \(body.utf8.count)\r\n\(extra)\r\n\(body)".utf8)
  }
}
