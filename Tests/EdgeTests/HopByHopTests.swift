import Testing

@testable import Edge

@Suite struct HopByHopTests {
  /// The names of the fields `forEachEndToEnd` passes on, in order.
  static func endToEnd(_ pairs: [(String, String)]) -> [String] {
    var names: [String] = []
    HTTPFields(pairs).forEachEndToEnd { name, _ in names.append(String(decoding: name, as: UTF8.self)) }
    return names
  }

  @Test(
    "Connection's tokens name fields, in any case, around optional whitespace, over several lines",
    arguments: [
      ([("Connection", "close")], ["close"]),
      ([("connection", " Keep-Alive ,X-A,\tx-b ")], ["keep-alive", "x-a", "x-b"]),
      ([("Connection", "a"), ("CONNECTION", "B")], ["a", "b"]),
      ([("Connection", ",, ,")], []),
      ([("X-Connection", "a")], []),
      ([("Connection", "")], []),
    ] as [([(String, String)], [String])])
  func nominated(fields: [(String, String)], expected: [String]) {
    let received = HTTPFields(fields)
    let names = HopByHop.nominated(by: received).map { String(decoding: received.bytes[$0], as: UTF8.self) }
    #expect(names.map { $0.lowercased() } == expected)
    for name in expected { #expect(received.connectionNominates(anyOf: [FieldName(name.uppercased())])) }
    #expect(!received.connectionNominates(anyOf: ["x-not-named"]))
  }

  @Test("the fixed set and the nominated fields go, in any case; the rest stays in order")
  func removed() {
    let fields: [(String, String)] = [
      ("Accept", "a"), ("Connection", "X-Secret, accept-language"), ("TE", "trailers"), ("x-secret", "s"),
      ("Accept-Language", "cy"), ("Upgrade", "h2c"), ("Keep-Alive", "5"), ("User-Agent", "u"),
      ("Proxy-Authorization", "Basic x"), ("Transfer-Encoding", "chunked"), ("HTTP2-Settings", "x"),
      ("PROXY-CONNECTION", "k"), ("Trailer", "x"), ("Proxy-Authenticate", "y"), ("Tea", "kept"),
    ]
    #expect(Self.endToEnd(fields) == ["Accept", "User-Agent", "Tea"])
  }

  @Test(
    "a field name matches only itself, in any case",
    arguments: [
      ("content-type", "Content-Type", true), ("content-type", "CONTENT-TYPE", true),
      ("content-type", "content-typ", false), ("content-type", "content-types", false),
      ("te", "tE", true), ("te", "t", false), ("x-a", "x_a", false), ("", "", true),
    ])
  func matches(name: String, received: String, expected: Bool) {
    #expect(FieldName(name).matches(received) == expected)
    #expect(FieldName(name).matches(ArraySlice(received.utf8)) == expected)
  }
}
