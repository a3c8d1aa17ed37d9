import CLinux
import Glibc
import Synchronization
import Testing

@testable import Edge

/// The loop's upstream client over real sockets to a stub core (TCP and Unix): requests go out as
/// given, answers come back through the call's closure, connections are reused, and every fault
/// the client can see becomes the fault the gateway answers with. A write is never sent twice.
@Suite(.serialized) struct UpstreamClientTests {
  /// A client on its own epoll set, driven the way a loop drives it.
  final class Harness {
    let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    var client: UpstreamClient<MonotonicClock>!
    var answers: [(CompletionKey, Response)] = []
    private var nextKey: Int32 = 1

    let metrics = UpstreamMetrics.register(upstreams: ["core"])
    let shard = MetricShard()

    init(_ endpoints: [UpstreamEndpoint]) {
      client = UpstreamClient(epoll: epoll, clock: MonotonicClock(), metrics: metrics, shard: shard) {
        [unowned self] key, response in
        answers.append((key, response))
      }
      client.configure(endpoints)
    }

    deinit {
      client = nil
      close(epoll)
    }

    /// Forwards a call and runs until it is answered (or 5 s pass); the answer's body text.
    func send(
      _ method: HTTPMethod = .get, _ target: String = "/x", body: String = "", upstream: String = "core"
    ) -> String? {
      let key = CompletionKey(fd: nextKey, generation: 1)
      nextKey += 1
      let head =
        "\(method.rawValue) \(target) HTTP/1.1\r\nhost: core\r\ncontent-length: \(body.utf8.count)\r\n\r\n"
      let call = UpstreamCall(
        upstream: upstream, method: method, head: Array(head.utf8), body: Array(body.utf8)
      ) {
        result in
        switch result {
        case .response(let r): .text(.ok, "\(r.status) \(String(decoding: r.body, as: UTF8.self))")
        case .fault(let f): .text(f.status, "fault \(f)")
        }
      }
      client.forward(call, key)
      run(until: { self.answers.contains { $0.0 == key } })
      return answers.first { $0.0 == key }.map { String(decoding: $0.1.body.contents, as: UTF8.self) }
    }

    /// Turns the loop until `done` (at most 5 s).
    func run(until done: () -> Bool) {
      var events = [epoll_event](repeating: epoll_event(), count: 16)
      let deadline = MonotonicClock().now().adding(.seconds(5))
      while !done() && MonotonicClock().now() < deadline {
        let n = epoll_wait(epoll, &events, 16, 5)
        for i in 0..<Int(max(n, 0)) { client.handle(events[i].data.fd, events[i].events) }
        client.fireTimers()
      }
    }
  }

  /// Waits (at most 5 s) until `done`, without turning the client's loop.
  static func wait(until done: () -> Bool) {
    let deadline = MonotonicClock().now().adding(.seconds(5))
    while !done() && MonotonicClock().now() < deadline { usleep(1000) }
  }

  static func endpoint(_ address: UpstreamEndpoint.Address, timeouts: UpstreamTimeouts = UpstreamTimeouts())
    -> UpstreamEndpoint
  {
    var endpoint = UpstreamEndpoint(name: "core", address: address)
    endpoint.timeouts = timeouts
    return endpoint
  }

  @Test(
    "a request goes out byte for byte and its answer comes back; the connection is reused",
    arguments: [false, true])
  func forwardsAndReuses(unix: Bool) throws {
    let stub = try StubUpstream(unix: unix) { request, index in
      // A HEAD's answer has no body: bytes after its head would be a second, unasked answer.
      request.text.hasPrefix("HEAD")
        ? Array("HTTP/1.1 200 X\r\ncontent-length: 5\r\n\r\n".utf8) : StubUpstream.answer(200, "n\(index)")
    }
    defer { stub.stop() }
    let h = Harness([Self.endpoint(stub.address)])
    #expect(h.send(.post, "/a?b=1", body: "{\"x\":1}") == "200 n0")
    #expect(h.send() == "200 n1")
    #expect(h.send(.head) == "200 ")
    #expect(stub.requests.map(\.connection) == [1, 1, 1], "one keep-alive connection")
    let m = h.metrics
    #expect(h.shard.load(m.requests.offset + m.outcome(0, status: 200)) == 3)
    #expect(h.shard.load(m.connections.offset + m.event(0, 0)) == 1, "opened")
    #expect(h.shard.load(m.connections.offset + m.event(0, 1)) == 2, "reused")
    #expect(h.answers.allSatisfy { $0.1.upstream?.upstream == "core" && $0.1.upstream?.status == 200 })
    #expect(
      stub.requests.first?.text == "POST /a?b=1 HTTP/1.1\r\nhost: core\r\ncontent-length: 7\r\n\r\n{\"x\":1}")
    #expect(h.client.socketCount == 1)
  }

  @Test("nothing listening: connection refused, over TCP and at a Unix path")
  func refused() throws {
    let stub = try StubUpstream { _, _ in nil }
    let port = stub.address
    stub.stop()
    for address in [port, .unix(path: "/tmp/band-edge-nothing-here-\(getpid()).sock")] {
      let h = Harness([Self.endpoint(address)])
      #expect(h.send() == "fault connectRefused", "\(address)")
      #expect(h.client.socketCount == 0)
    }
  }

  @Test("an unknown or switched-off upstream is answered without a connection")
  func disabled() throws {
    let stub = try StubUpstream { _, _ in StubUpstream.answer() }
    defer { stub.stop() }
    var off = Self.endpoint(stub.address)
    off.enabled = false
    let h = Harness([off])
    #expect(h.send() == "fault disabled")
    #expect(h.send(upstream: "other") == "fault disabled")
    #expect(stub.connections == 0)
    // Switched on by a reload: the same pool serves.
    h.client.configure([Self.endpoint(stub.address)])
    #expect(h.send() == "200 ok")
  }

  @Test("no answer within the first-byte timeout is a 504 fault; the connection is not reused")
  func firstByteTimeout() throws {
    let stub = try StubUpstream { _, index in index == 0 ? [] : StubUpstream.answer() }
    defer { stub.stop() }
    var timeouts = UpstreamTimeouts()
    timeouts.firstByte = .milliseconds(50)
    let h = Harness([Self.endpoint(stub.address, timeouts: timeouts)])
    #expect(h.send() == "fault firstByteTimeout")
    #expect(h.send() == "200 ok")
    #expect(stub.requests.map(\.connection) == [1, 2])
  }

  @Test(
    "a malformed or oversized answer is a 502 fault",
    arguments: [
      ("HTTP/1.1 200 OK\ncontent-length: 0\n\n", "fault badResponse(\"line ended in a bare LF\")"),
      ("HTTP/1.1 200 OK\r\ncontent-length: 99999999999\r\n\r\n", "fault responseBodyTooLarge"),
      ("HTTP/1.1 101 Switching\r\n\r\n", "fault badResponse(\"101 Switching Protocols\")"),
    ])
  func badAnswers(answer: String, expected: String) throws {
    let stub = try StubUpstream { _, _ in Array(answer.utf8) }
    defer { stub.stop() }
    let h = Harness([Self.endpoint(stub.address)])
    #expect(h.send() == expected)
    #expect(h.client.socketCount == 0, "closed after a fault")
  }

  @Test("an interim answer is skipped; a close-delimited body ends with the connection")
  func interimAndCloseDelimited() throws {
    let stub = try StubUpstream { _, index in
      index == 0
        ? Array("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nhi".utf8)
        : Array("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nto the end".utf8)
    }
    defer { stub.stop() }
    let h = Harness([Self.endpoint(stub.address)])
    #expect(h.send() == "201 hi")
    #expect(h.send() == "200 to the end")
    #expect(h.client.socketCount == 0, "a close-delimited answer leaves no connection to reuse")
  }

  @Test(
    "a short read ends the reading (no read only to hear EAGAIN); an end queued behind the bytes is read when the event says the upstream hung up",
    arguments: [false, true])
  func shortReads(hungUp: Bool) throws {
    var pair: [Int32] = [0, 0]
    try #require(
      socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
    defer { close(pair[0]) }
    let socket = UpstreamSocket(fd: pair[0], id: UpstreamConnectionID(rawValue: 1), generation: 1)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4, alignment: 1)
    defer { buffer.deallocate() }
    let write = { (text: String) in #expect(Glibc.write(pair[1], text, text.utf8.count) == text.utf8.count) }
    write("abcdefgh")
    #expect(socket.read(through: buffer, hungUp: false) == .drained, "full reads go on to the short one")
    #expect(socket.input == Array("abcdefgh".utf8))
    write("ij")
    close(pair[1])
    #expect(socket.read(through: buffer, hungUp: hungUp) == (hungUp ? .ended : .drained))
    #expect(socket.input == Array("abcdefghij".utf8))
  }

  @Test("a stale keep-alive connection: a GET goes again on a new one; a POST is never sent twice")
  func idleCloseRace() throws {
    // Each answer is followed by a close the client is not told of (no `Connection: close`).
    let stub = try StubUpstream { _, index in
      StubUpstream.answer(200, "n\(index)", extra: "x-stub-close: 1\r\n")
    }
    defer { stub.stop() }
    let h = Harness([Self.endpoint(stub.address)])
    #expect(h.send() == "200 n0")
    // Not through the client's loop, which would see the close and drop the connection first.
    Self.wait { stub.closed == 1 }
    #expect(h.send() == "200 n1", "sent again on a fresh connection")
    #expect(stub.requests.map(\.connection) == [1, 2])
    Self.wait { stub.closed == 2 }
    #expect(h.send(.post, body: "{}").map { $0.hasPrefix("fault ") } == true)
    #expect(stub.requests.count == 2, "the write went on the stale connection only, never again")
    #expect(h.shard.load(h.metrics.retries.offset) == 1, "the GET's retry, not the POST")
    #expect(
      h.answers.last?.1.upstream.map { $0.status == nil && $0.error == "connection_terminated" } == true)
  }
}
