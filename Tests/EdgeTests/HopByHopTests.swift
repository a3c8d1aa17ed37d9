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
    var names: [String] = []
    HopByHop.forEachNominated(by: received) { token in
      names.append(String(decoding: received.bytes[token], as: UTF8.self))
      return true
    }
    #expect(names.map { $0.lowercased() } == expected)
    for name in expected { #expect(HopByHop.isNominated(ArraySlice(name.uppercased().utf8), by: received)) }
    #expect(!HopByHop.isNominated(ArraySlice("x-not-named".utf8), by: received))
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

  @Test("a Connection naming more names than are gathered at once still removes each of them")
  func manyNominated() {
    let names = (1...12).map { "X-F\($0)" }
    let fields = [("Connection", names.joined(separator: ", "))] + names.map { ($0, "v") } + [("Accept", "a")]
    #expect(Self.endToEnd(fields) == ["Accept"])
    #expect(
      Self.endToEnd([("Connection", "x-f1, x-f2")] + names.map { ($0, "v") }) == Array(names.dropFirst(2)))
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
