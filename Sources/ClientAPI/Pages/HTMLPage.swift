import Accounts
import Deployment
import Edge

/// Server-rendered pages (sign-in, account, errors, link fallbacks): no script at all, the shell's
/// stylesheet, header, footer, favicon and manifest, the deployment label outside production, and
/// the security headers below.
struct HTMLPage {
  let title: String
  var body = ""
  /// The form's refusals shown on this page (`summary`): when there is one, the title starts
  /// with "Error: ".
  var errors = FieldErrors()
  /// Whether the page says that something was refused (`alert`): the title then starts "Error: " too.
  var refused = false

  /// Headers on every page: nothing may run,
  /// frame or post elsewhere; no referrer leaves the site. `same-origin` rather than `no-referrer`:
  /// under `no-referrer` browsers send `Origin: null` with our own form posts (Fetch §3.1), which
  /// the same-origin check must refuse. The native callback page (which sees codes) will send none.
  static let securityHeaders = headers(referrerPolicy: "same-origin")

  /// The security headers with `referrerPolicy` (`no-referrer` on the page that sees codes).
  static func headers(referrerPolicy: String) -> [(name: String, value: String)] {
    [
      (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; manifest-src 'self'; form-action 'self'; "
          + "frame-ancestors 'none'; base-uri 'none'"
      ),
      ("Referrer-Policy", referrerPolicy),
      ("X-Content-Type-Options", "nosniff"),
      ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
      ("Cross-Origin-Opener-Policy", "same-origin"),
    ]
  }

  /// The bar colour of each environment (the shell's `theme-color` and styles.css agree).
  static func themeColour(_ environment: Environment) -> String {
    switch environment {
    case .production: "#1d4ed8"
    case .staging: "#b45309"
    case .development: "#047857"
    }
  }

  /// Appends markup written here (never text from a request: use `text`).
  mutating func html(_ markup: String) { body += markup }

  /// Appends `title` as the page's heading (escaped).
  mutating func heading(_ title: String) {
    html("<h1>")
    text(title)
    html("</h1>\n")
  }

  /// Appends `message`, if any, as an alert paragraph (read out by screen readers at once) that
  /// takes focus on load unless an error summary already does; the title then starts "Error: ".
  mutating func alert(_ message: String?) {
    guard let message else { return }
    refused = true
    html(
      errors.isEmpty
        ? "<p class=\"error\" id=\"alert\" role=\"alert\" tabindex=\"-1\" autofocus>"
        : "<p class=\"error\" role=\"alert\">")
    text(message)
    html("</p>\n")
  }

  /// Appends the error summary of `errors` (GOV.UK's pattern) and keeps them for the title: a box
  /// headed "There is a problem" that links each message to its field, focused when the page
  /// loads (`autofocus`: the pages run no script) so that it is read out first. Nothing when
  /// `errors` is empty.
  mutating func summary(_ errors: FieldErrors) {
    self.errors = errors
    guard !errors.isEmpty else { return }
    html("<div class=\"error-summary\" id=\"error-summary\" role=\"alert\" tabindex=\"-1\" autofocus ")
    html(
      "aria-labelledby=\"error-summary-title\">\n<h2 id=\"error-summary-title\">There is a problem</h2>\n<ul>\n"
    )
    for error in errors.list {
      html("<li><a href=\"#\(HTMLText.escape(error.field))\">")
      text(error.message)
      html("</a></li>\n")
    }
    html("</ul>\n</div>\n")
  }

  /// Appends `value` escaped for element content and attribute values.
  mutating func text(_ value: String) { body += HTMLText.escape(value) }

  /// The page as a response.
  func response(
    _ status: Status, context: ClientContext, headers: [(name: String, value: String)] = [],
    referrerPolicy: String = "same-origin"
  ) -> Response {
    response(
      status, deployment: context.deployment, stylesheet: context.stylesheet, headers: headers,
      referrerPolicy: referrerPolicy)
  }

  /// The page as a response, for callers without a client context (the engine's error pages).
  func response(
    _ status: Status, deployment: Deployment, stylesheet: String?,
    headers: [(name: String, value: String)] = [],
    referrerPolicy: String = "same-origin"
  ) -> Response {
    Response(
      status: status,
      headers: [("Content-Type", "text/html; charset=utf-8")] + Self.headers(referrerPolicy: referrerPolicy)
        + headers,
      body: .bytes(Array(document(deployment: deployment, stylesheet: stylesheet).utf8)))
  }

  /// The whole document: the shell's head links, skip link, header, `main` and footer around `body`.
  func document(deployment: Deployment, stylesheet: String?) -> String {
    let production = deployment.environment == .production
    var page =
      "<!doctype html>\n<html lang=\"en-GB\" data-environment=\"\(deployment.environment.rawValue)\">\n<head>\n"
    page +=
      "<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    page +=
      "<title>\(errors.isEmpty && !refused ? "" : "Error: ")\(production ? "" : "[" + HTMLText.escape(deployment.label) + "] ")"
      + "\(HTMLText.escape(title)) · Band Licence</title>\n"
    page += "<meta name=\"theme-color\" content=\"\(Self.themeColour(deployment.environment))\">\n"
    page += "<link rel=\"manifest\" href=\"/manifest.webmanifest\">\n"
    page += "<link rel=\"icon\" href=\"/favicon.ico\" sizes=\"any\">\n"
    if let stylesheet {
      page += "<link rel=\"stylesheet\" href=\"\(HTMLText.escape(stylesheet))\">\n"
    }
    page += "</head>\n<body>\n<a class=\"skip\" href=\"#main\">Skip to content</a>\n"
    page += "<header class=\"bar\">\n"
    page +=
      "<p class=\"brand\"><a href=\"/\"><span class=\"logo\" aria-hidden=\"true\"></span>Band Licence</a></p>\n"
    if !production { page += "<p class=\"deployment\">\(HTMLText.escape(deployment.label))</p>\n" }
    page += "</header>\n<main id=\"main\" tabindex=\"-1\">\n" + body + "</main>\n"
    page += "<footer class=\"foot\"><p>Band Licence</p></footer>\n</body>\n</html>\n"
    return page
  }

  /// A short page that says what went wrong and what to do, with a link to go on from.
  static func problem(
    _ status: Status, _ title: String, _ message: String, context: ClientContext,
    next: (href: String, label: String) = ("/sign-in", "Back to sign in")
  ) -> Response {
    problemPage(title, message, next: next).response(status, context: context)
  }

  /// The page of `problem`, not yet a response.
  static func problemPage(_ title: String, _ message: String, next: (href: String, label: String)) -> HTMLPage
  {
    var page = HTMLPage(title: title)
    page.html("<h1>")
    page.text(title)
    page.html("</h1>\n<p>")
    page.text(message)
    page.html("</p>\n<p><a class=\"button\" href=\"\(HTMLText.escape(next.href))\">")
    page.text(next.label)
    page.html("</a></p>\n")
    return page
  }

}

extension Role {
  /// How a page names the role.
  var label: String {
    switch self {
    case .administrator: "Administrator"
    case .teacher: "Teacher"
    case .readOnly: "Read-only"
    }
  }
}
