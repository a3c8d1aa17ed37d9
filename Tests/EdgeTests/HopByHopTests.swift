import Testing

@testable import Edge

@Suite struct HopByHopTests {
  @Test(
    "Connection's tokens name fields, in any case, around optional whitespace, over several lines",
    arguments: [
      ([("Connection", "close")], ["close"]),
      ([("connection", " Keep-Alive ,X-A,\tx-b ")], ["keep-alive", "x-a", "x-b"]),
      ([("Connection", "a"), ("CONNECTION", "B")], ["a", "b"]),
      ([("Connection", ",, ,")], []),
      ([("X-Connection", "a")], []),
    ] as [([(String, String)], [String])])
  func nominated(fields: [(String, String)], expected: [String]) {
    #expect(HopByHop.nominated(by: fields.map { (name: $0.0, value: $0.1) }) == Set(expected))
  }

  @Test("removed: the fixed set and the nominated fields go, in any case; the rest stays in order")
  func removed() {
    let fields: [(name: String, value: String)] = [
      ("Accept", "a"), ("Connection", "X-Secret, accept-language"), ("TE", "trailers"), ("x-secret", "s"),
      ("Accept-Language", "cy"), ("Upgrade", "h2c"), ("Keep-Alive", "5"), ("User-Agent", "u"),
      ("Proxy-Authorization", "Basic x"), ("Transfer-Encoding", "chunked"),
    ]
    #expect(HopByHop.removed(from: fields).map(\.name) == ["Accept", "User-Agent"])
  }
}
