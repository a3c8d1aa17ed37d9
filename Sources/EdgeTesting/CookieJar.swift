import Edge

/// The cookies of one client of one host, kept as a browser keeps them from `Set-Cookie` (RFC 6265
/// §5.2, §5.3) and sent back in one `Cookie` field (§5.4), oldest first.
///
/// One host and no clock: `Domain`, `Path` and `Secure` are not read, and `Expires` is not either;
/// `Max-Age` of zero or less removes the cookie (§5.2.2).
public struct CookieJar: Sendable {
  private var entries: [(name: String, value: String)] = []

  /// An empty jar.
  public init() {}

  /// The value of the cookie `name`; setting nil removes it, setting a value keeps its place.
  public subscript(name: String) -> String? {
    get { entries.first { $0.name == name }?.value }
    set {
      let index = entries.firstIndex { $0.name == name }
      switch (index, newValue) {
      case (let i?, let value?): entries[i].value = value
      case (let i?, nil): entries.remove(at: i)
      case (nil, let value?): entries.append((name, value))
      case (nil, nil): break
      }
    }
  }

  /// Whether no cookie is kept.
  public var isEmpty: Bool { entries.isEmpty }

  /// The names of the cookies kept, oldest first.
  public var names: [String] { entries.map(\.name) }

  /// The `Cookie` field value (`a=1; b=2`), or nil when the jar is empty.
  public var header: String? {
    entries.isEmpty ? nil : entries.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
  }

  /// Keeps (or removes) the cookies every `Set-Cookie` field of `response` sets.
  public mutating func receive(_ response: Response) {
    for (name, value) in response.headers where name.lowercased() == "set-cookie" { receive(value) }
  }

  /// Keeps (or removes) the cookie one `Set-Cookie` value sets; a value without `name=` is ignored
  /// (RFC 6265 §5.2).
  public mutating func receive(_ setCookie: String) {
    let parts = setCookie.split(separator: ";", omittingEmptySubsequences: false)
    guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return }
    let name = Self.trimmed(pair[..<equals])
    guard !name.isEmpty else { return }
    // §5.3 step 3: the last Max-Age attribute is the one that counts.
    var maxAge: Int? = nil
    for attribute in parts.dropFirst() {
      let split = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      guard Self.trimmed(split[0]).lowercased() == "max-age", split.count == 2 else { continue }
      // §5.2.2: an optional "-" then digits; anything else is ignored.
      let text = Self.trimmed(split[1])
      let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
      guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
      maxAge = text.hasPrefix("-") ? -1 : Int(digits) ?? Int.max
    }
    if let maxAge, maxAge <= 0 {
      self[name] = nil
    } else {
      self[name] = Self.trimmed(pair[pair.index(after: equals)...])
    }
  }

  /// `text` without the spaces and tabs around it (RFC 6265 §5.2: WSP).
  private static func trimmed(_ text: Substring) -> String {
    var text = text
    while let c = text.first, c == " " || c == "\t" { text.removeFirst() }
    while let c = text.last, c == " " || c == "\t" { text.removeLast() }
    return String(text)
  }
}
