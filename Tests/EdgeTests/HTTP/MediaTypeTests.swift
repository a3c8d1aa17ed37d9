import Testing

@testable import Edge

@Suite("Media types (RFC 9110 §8.3.1)")
struct MediaTypeTests {
  @Test(
    "parsed with OWS around ';', case-insensitive names and quoted values",
    arguments: [
      ("application/json", "application/json", [] as [String]),
      ("application/json ; charset=utf-8", "application/json", ["charset=utf-8"]),
      ("Application/JSON;Charset=UTF-8", "application/json", ["charset=UTF-8"]),
      (
        "application/x-www-form-urlencoded ; charset=UTF-8", "application/x-www-form-urlencoded",
        ["charset=UTF-8"]
      ),
      ("  text/plain\t;\tcharset=\"utf-8\"  ", "text/plain", ["charset=utf-8"]),
      ("text/plain; a=\"x;y\\\"z\"; b=c", "text/plain", ["a=x;y\"z", "b=c"]),
      ("text/plain;", "text/plain", []),
      ("text/plain; ;a=b", "text/plain", ["a=b"]),
      ("multipart/form-data; boundary=----x", "multipart/form-data", ["boundary=----x"]),
    ])
  func valid(text: String, essence: String, parameters: [String]) throws {
    let type = try #require(MediaType(text))
    #expect("\(type.type)/\(type.subtype)" == essence)
    #expect(type.parameters.map { "\($0.name)=\($0.value)" } == parameters)
  }

  @Test(
    "malformed media types are refused",
    arguments: [
      "", "application", "application/", "/json", "application /json", "application/ json",
      "application/json x",
      "application/json; charset", "application/json; charset=", "application/json; =utf-8",
      "application/json; charset=\"utf-8", "application/json; charset=utf 8", "application/json, text/plain",
      "application/json; charset=\"a\u{1}b\"", "appli\u{0}cation/json",
    ])
  func invalid(text: String) {
    #expect(MediaType(text) == nil)
  }

  @Test(
    "the charset parameter says UTF-8 or nothing",
    arguments: [
      ("application/json", true), ("application/json;charset=utf-8", true),
      ("application/json;CHARSET=\"UTF-8\"", true),
      ("application/json;charset=iso-8859-1", false), ("application/json;charset=utf-16", false),
    ])
  func utf8(text: String, isUTF8: Bool) throws {
    #expect(try #require(MediaType(text)).isUTF8 == isUTF8)
  }
}
