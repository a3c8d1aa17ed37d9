import Edge

/// The product's mail, in one voice: a greeting, short paragraphs, at most one button-like link
/// and a closing line saying why the person got it. Plain text and simple HTML with the same
/// words; no images, no tracking, no link but the one to the deployment's own origin.
public enum MailTemplates {
  /// A message of `kind` to `to` (greeted by `name` when known) with `paragraphs`, an optional
  /// `link` (label, absolute URL on the deployment's origin) and `reason` (why this came).
  public static func message(
    kind: String, to: EmailAddress, name: String?, subject: String, paragraphs: [String],
    link: (label: String, url: String)? = nil, reason: String
  ) -> MailMessage {
    let greeting = name.flatMap(Self.safeName).map { "Hello \($0)," } ?? "Hello,"
    var text = greeting + "\n\n" + paragraphs.joined(separator: "\n\n") + "\n\n"
    if let link { text += "\(link.label):\n\(link.url)\n\n" }
    text += "\(reason)\n\n— Band Licence\n"
    var html = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
    html +=
      HTMLText.escape(subject)
      + "</title></head>\n<body style=\"font-family: sans-serif; line-height: 1.5\">\n"
    html += "<p>\(HTMLText.escape(greeting))</p>\n"
    for paragraph in paragraphs { html += "<p>\(HTMLText.escape(paragraph))</p>\n" }
    if let link {
      html += "<p><a href=\"\(HTMLText.escape(link.url))\">\(HTMLText.escape(link.label))</a></p>\n"
      html +=
        "<p>If the link does not open, copy this address into your browser:<br>\(HTMLText.escape(link.url))</p>\n"
    }
    html += "<p style=\"color: #555\">\(HTMLText.escape(reason))</p>\n<p>— Band Licence</p>\n</body></html>\n"
    return MailMessage(kind: kind, to: to, subject: subject, text: text, html: html)
  }

  /// To the owner of an address another account asked to move to. The asker is told the
  /// same as when the address is free; this owner learns that someone tried. `link` is the
  /// deployment's recovery page.
  public static func addressInUse(to: EmailAddress, link: String) -> MailMessage {
    message(
      kind: "email_change_in_use", to: to, name: nil,
      subject: "Someone tried to use your address on Band Licence",
      paragraphs: [
        "Someone signed in to another Band Licence account asked to change that account's email address to "
          + "this one. This address already belongs to your account, so nothing changed.",
        "If you know who it was, there is nothing to do. If you have forgotten your password, you can choose "
          + "a new one.",
      ],
      link: ("Choose a new password", link),
      reason: "You got this email because this address belongs to a Band Licence account.")
  }

  /// A name people typed, when it may appear in mail: it passes today's `AccountRules` (a name
  /// stored before a rule existed may not), else nil, and the mail says something general instead.
  public static func safeName(_ name: String) -> String? { AccountRules.displayName(name) }
}
