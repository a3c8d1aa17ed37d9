/// A usage error: printed as one line on stderr, exit status 2.
struct UsageError: Error {
  let message: String
  init(_ message: String) { self.message = message }
}

/// The words after a subcommand, consumed flag by flag.
struct Arguments {
  private var words: [String]

  init(_ words: [String]) { self.words = words }

  var isEmpty: Bool { words.isEmpty }

  mutating func next() -> String? { words.isEmpty ? nil : words.removeFirst() }

  /// `--flag=value` as (`--flag`, `value`); any other word as (word, nil).
  static func split(_ word: String) -> (String, String?) {
    guard word.hasPrefix("--"), let eq = word.firstIndex(of: "=") else { return (word, nil) }
    return (String(word[..<eq]), String(word[word.index(after: eq)...]))
  }

  /// The value after `flag` (either `--flag value` or `--flag=value`).
  mutating func value(of flag: String, inline: String?) throws(UsageError) -> String {
    if let inline { return inline }
    guard let value = next() else { throw UsageError("\(flag) needs a value") }
    return value
  }

  static func integer(_ text: String, _ flag: String, min: Int = 0, max: Int = Int.max) throws(UsageError)
    -> Int
  {
    guard let n = Int(text), n >= min, n <= max else {
      throw UsageError("\(flag) takes a whole number from \(min) to \(max), not '\(text)'")
    }
    return n
  }

  /// Seconds with an optional fraction: `10`, `0.25`.
  static func seconds(_ text: String, _ flag: String, zeroAllowed: Bool = false) throws(UsageError)
    -> Duration
  {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count <= 2, let whole = Int(parts[0]), whole >= 0, whole <= 86_400 else {
      throw UsageError("\(flag) takes seconds (for example 10 or 0.5), not '\(text)'")
    }
    var nanos = 0
    if parts.count == 2 {
      let digits = parts[1]
      guard !digits.isEmpty, digits.count <= 9, let f = Int(digits) else {
        throw UsageError("\(flag) takes seconds (for example 10 or 0.5), not '\(text)'")
      }
      nanos = f * Int(String("1" + String(repeating: "0", count: 9 - digits.count)))!
    }
    guard whole > 0 || nanos > 0 || zeroAllowed else {
      throw UsageError("\(flag) must be more than 0 seconds")
    }
    return .seconds(whole) + .nanoseconds(nanos)
  }
}
