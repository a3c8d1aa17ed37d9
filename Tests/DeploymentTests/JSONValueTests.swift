import Testing

@testable import Deployment

@Suite("JSON parsing")
struct JSONValueTests {
  @Test(
    "an object naming a key twice is refused, wherever it is and however the key is written",
    arguments: [
      (#"{"a": 1, "a": 2}"#, "a"),
      (#"{"a": 1, "a": 1}"#, "a"),
      (#"{"a": 1, "\u0061": 2}"#, "a"),
      (#"{"\u00e9": 1, "é": 2}"#, "é"),
      (#"{"é": 1, "e\u0301": 2}"#, "é"),
      (#"{"\ud83c\udfb8": 1, "🎸": 2}"#, "🎸"),
      (#"{"a\"b": 1, "a\u0022b": 2}"#, "a\"b"),
      (#"{"x": {"a": 1, "b": 2, "a": 3}}"#, "a"),
      (#"[{"ok": 1}, {"b": [], "b": {}}]"#, "b"),
      (#"{"x": [{"y": {"z": 1, "z": 2}}]}"#, "z"),
      ("{\"a\" \n:\t1, \"a\"\r\n: 2}", "a"),
    ])
  func repeatedKey(_ text: String, key: String) {
    #expect(throws: JSONParseError.repeatedKey(key)) { try JSONValue.parse(Array(text.utf8)) }
  }

  @Test(
    "the same key in different objects, keys that differ, and keys as values are accepted",
    arguments: [
      #"{"a": 1, "b": 2}"#,
      #"{"a": {"a": {"a": 1}}}"#,
      #"[{"a": 1}, {"a": 2}]"#,
      #"{"a": "a", "b": ["a", "a"]}"#,
      #"{"a": 1, "A": 2, "a ": 3, "\\u0061": 4}"#,
      #"{"x": {"a": 1}, "a": 2}"#,
      #"{"a:": 1, "a": 2, "\"a": 3}"#,
      #"{"": 1, " ": 2}"#,
    ])
  func distinctKeys(_ text: String) throws {
    #expect(throws: Never.self) { try JSONValue.parse(Array(text.utf8)) }
  }

  @Test("text that is not JSON is refused as invalid", arguments: ["{", "{\"a\": }", "", "{\"a\" 1}"])
  func invalid(_ text: String) {
    #expect(throws: JSONParseError.invalid) { try JSONValue.parse(Array(text.utf8)) }
  }
}
