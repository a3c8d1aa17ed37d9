import Accounts
import Edge

/// What a refused form says, field by field: each message sits next to its
/// input (`HTMLPage.field`), which is `aria-invalid` and described by it, and the page's error
/// summary links to it (`HTMLPage.summary`).
struct FieldErrors: Sendable {
  /// The refusals in the order of the form's fields: the input's `id` and the message.
  private(set) var list: [(field: String, message: String)] = []

  /// No refusal.
  init() {}

  /// One refusal of the input `field`.
  init(_ field: String, _ message: String) { list = [(field, message)] }

  /// Adds a refusal of the input `field`.
  mutating func add(_ field: String, _ message: String) { list.append((field, message)) }

  var isEmpty: Bool { list.isEmpty }

  /// The message for the input `field`, if it was refused.
  subscript(field: String) -> String? { list.first { $0.field == field }?.message }
}

extension HTMLPage {
  /// A labelled input (or `select` when `options` is given) with its hint and, when `errors`
  /// refuses it, its error message: `aria-invalid="true"` and `aria-describedby` naming the hint
  /// and the message. `attributes` is markup written here (type, autocomplete, ...); `value` is
  /// escaped.
  static func field(
    _ id: String, name: String? = nil, label: String, attributes: String, value: String? = nil,
    hint: String? = nil, errors: FieldErrors = FieldErrors(), options: String? = nil
  ) -> String {
    var out = "<label for=\"\(id)\">\(HTMLText.escape(label))</label>\n"
    var described: [String] = []
    if let hint {
      out += "<p class=\"hint\" id=\"\(id)-hint\">\(HTMLText.escape(hint))</p>\n"
      described.append("\(id)-hint")
    }
    let error = errors[id]
    if let error {
      out += "<p class=\"field-error\" id=\"\(id)-error\"><span class=\"visually-hidden\">Error: </span>"
      out += HTMLText.escape(error) + "</p>\n"
      described.append("\(id)-error")
    }
    var common = "id=\"\(id)\" name=\"\(HTMLText.escape(name ?? id))\""
    if !attributes.isEmpty { common += " " + attributes }
    if error != nil { common += " aria-invalid=\"true\"" }
    if !described.isEmpty { common += " aria-describedby=\"\(described.joined(separator: " "))\"" }
    if let options { return out + "<select \(common)>\(options)</select>\n" }
    if let value, !value.isEmpty { common += " value=\"\(HTMLText.escape(value))\"" }
    return out + "<input \(common)>\n"
  }
}
