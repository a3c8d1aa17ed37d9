import EdgeTesting
import Testing

/// The test client's form bodies are what a browser sends (WHATWG URL §5.2).
@Suite("Request bodies")
struct RequestBodyTests {
  @Test(
    "form serialization: letters, digits and *-._ as they are, a space as +, every other byte %XX",
    arguments: [
      ("", ""), ("Ada09", "Ada09"), ("*-._", "*-._"), ("two words", "two+words"), ("a+b", "a%2Bb"),
      ("ada@example.test", "ada%40example.test"), ("a&b=c", "a%26b%3Dc"), ("~!'()", "%7E%21%27%28%29"),
      ("%", "%25"), ("/?#", "%2F%3F%23"), ("é€", "%C3%A9%E2%82%AC"), ("\u{0}\n\u{7F}", "%00%0A%7F"),
    ])
  func encoded(text: String, expected: String) {
    #expect(RequestBody.formEncoded(text) == expected)
  }

  @Test("a form: pairs joined with & and =, as application/x-www-form-urlencoded; JSON as it is")
  func bodies() {
    let form = RequestBody.form([("e-mail", "ada@example.test"), ("pass word", "a&b"), ("empty", "")])
    #expect(String(decoding: form.bytes, as: UTF8.self) == "e-mail=ada%40example.test&pass+word=a%26b&empty=")
    #expect(form.contentType == "application/x-www-form-urlencoded")
    let json = RequestBody.json(#"{"a": "é"}"#)
    #expect(json.bytes == Array(#"{"a": "é"}"#.utf8) && json.contentType == "application/json")
    #expect(RequestBody.empty.bytes.isEmpty && RequestBody.empty.contentType == nil)
  }
}
