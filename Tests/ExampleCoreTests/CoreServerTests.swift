import Deployment
import Edge
import Foundation
import Synchronization
import Testing

@testable import Accounts
@testable import ExampleCore
@testable import Gateway

#if canImport(Glibc)
  import Glibc
#endif

/// Serves one fixed answer to every connection on 127.0.0.1 (a stand-in for band-edge's JWKS
/// route), counting the requests.
final class StubServer: Sendable {
  let port: UInt16
  let requests = Atomic<Int>(0)
  private let fd: Int32

  init(answer: [UInt8]) throws {
    let address = try Listener.claim(.v4(host: "127.0.0.1", port: 0))
    fd = try Listener.open(address, backlog: 16)
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
    port = address.port
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(answer.count)\r\n"
    let response = Array((head + "Connection: close\r\n\r\n").utf8) + answer
    pthread_detach(
      startThread { [self] in
        while case let client = accept(fd, nil, nil), client >= 0 {
          var buffer = [UInt8](repeating: 0, count: 4096)
          _ = recv(client, &buffer, buffer.count, 0)
          requests.add(1, ordering: .relaxed)
          _ = response.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
          close(client)
        }
      })
  }

  func stop() { shutdown(fd, Int32(SHUT_RDWR)) }
}

/// A client connection that sends raw bytes and reads one answer at a time.
struct RawClient: ~Copyable {
  let fd: Int32
  var pending: [UInt8] = []

  init(port: UInt16) throws {
    fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else { throw SystemError("connect") }
  }

  deinit { close(fd) }

  /// Sends `bytes`, then reads one answer: its status, its fields (names in lower case), its body.
  mutating func exchange(_ bytes: [UInt8]) throws -> (status: Int, fields: [String: String], body: [UInt8]) {
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      if let end = pending.indices.dropLast(3).first(where: { pending[$0..<$0 + 4] == [13, 10, 13, 10] }) {
        let lines = String(decoding: pending[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
          let parts = line.split(separator: ":", maxSplits: 1)
          fields[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(fields["content-length"] ?? "0") ?? 0
        if pending.count >= end + 4 + length {
          let body = Array(pending[(end + 4)..<(end + 4 + length)])
          pending.removeFirst(end + 4 + length)
          return (Int(lines[0].split(separator: " ")[1]) ?? 0, fields, body)
        }
      }
      let count = recv(fd, &chunk, chunk.count, 0)
      guard count > 0 else { throw SystemError("recv") }
      pending += chunk[..<count]
    }
  }
}

@Suite("The example core over a socket, its keys from a JWKS served on another")
struct CoreServerTests {
  @Test("a read and a write on one keep-alive connection, verified with a JWKS fetched over HTTP")
  func overTheWire() throws {
    let signing = try Signing()
    let stub = try StubServer(answer: Signing.jwks([signing.key]))
    defer { stub.stop() }
    let lines = Mutex<[String]>([])
    var settings = CoreSettings()
    settings.listen = .v4(host: "127.0.0.1", port: 0)
    settings.jwks = "http://127.0.0.1:\(stub.port)/.well-known/band-licence/jwks.json"
    let server = try settings.server { line in lines.withLock { $0.append(line) } }
    defer { server.stop() }
    pthread_detach(startThread { server.run() })
    let now = Int(time(nil))
    var client = try RawClient(port: server.address.port)
    let read = try signing.read(at: now)
    let get =
      "GET /api/client/v1/schools/sch_demo1/students HTTP/1.1\r\nHost: core\r\n"
      + "Band-Licence-Assertion: \(read)\r\n\r\n"
    let students = try client.exchange(Array(get.utf8))
    #expect(students.status == 200 && students.fields["cache-control"] == "no-store")
    #expect(String(decoding: students.body, as: UTF8.self).contains(#""name":"Ada Example""#))
    let write = try signing.write(at: now)
    let post =
      "POST \(Signing.target) HTTP/1.1\r\nHost: core\r\nContent-Type: application/json\r\n"
      + "Idempotency-Key: key-1\r\nBand-Licence-Assertion: \(write)\r\nContent-Length: \(Signing.body.count)\r\n\r\n"
    let recorded = try client.exchange(Array(post.utf8) + Signing.body)
    #expect(recorded.status == 201)
    let replayed = try client.exchange(Array(post.utf8) + Signing.body)
    #expect(replayed.status == 401)
    #expect(String(decoding: replayed.body, as: UTF8.self).contains(#""error":"assertion_replay""#))
    #expect(!String(decoding: replayed.body, as: UTF8.self).contains(write))
    #expect(stub.requests.load(ordering: .relaxed) == 1)
    #expect(
      lines.withLock { $0 }.suffix(3) == [
        "GET /api/client/v1/schools/sch_demo1/students 200", "POST \(Signing.target) 201",
        "POST \(Signing.target) 401 assertion_replay: this jti was seen before",
      ])
  }

  @Test("bytes that are not a request get a 400 and the connection's end")
  func badRequest() throws {
    let signing = try Signing()
    let server = try CoreServer(
      listen: .v4(host: "127.0.0.1", port: 0), service: CoreService(verifier: signing.verifier()),
      log: { _ in })
    defer { server.stop() }
    pthread_detach(startThread { server.run() })
    var client = try RawClient(port: server.address.port)
    let answer = try client.exchange(Array("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".utf8))
    #expect(answer.status == 400 && answer.fields["connection"] == "close")
  }
}
