import Accounts
import Edge

extension ClientContext {
  /// The refusal of a form POST that is not provably from our own page: 415 for a body that is
  /// not a URL-encoded UTF-8 form (our forms send that, HTML §4.10.21.7), 403 without a
  /// same-origin `Origin`/`Referer`, 403 without the CSRF token bound to `binding`. `signedOut`
  /// posts carry no session to bind a token to, so only the origin is checked. Every server page
  /// uses this one check.
  func formRefusal(_ request: Request, binding: String?, signedOut: Bool = false) -> Response? {
    if let type = request.mediaType, !(type.is("application", "x-www-form-urlencoded") && type.isUTF8) {
      return HTMLPage.problem(
        .unsupportedMediaType, "Form not readable",
        "This form was sent in a way Band Licence cannot read (it must be URL-encoded UTF-8). "
          + "Open the page again and resend it.", context: self)
    }
    guard WebSecurity.sameOrigin(request, deployment: deployment) else {
      return HTMLPage.problem(
        .forbidden, "Request refused",
        "This form must be sent from a Band Licence page. Open the page again and resend it.", context: self)
    }
    if signedOut { return nil }
    guard WebSecurity.csrfValid(WebSecurity.form(request)?["csrf"], binding: binding) else {
      return HTMLPage.problem(
        .forbidden, "Form expired",
        "This form has expired or was not sent from Band Licence. Open the page again and resend it.",
        context: self)
    }
    return nil
  }

  /// The page for an address over its sign-in limit (sent from the loop, before any password work).
  func tooManySignIns(_ wait: Int) -> Response {
    HTMLPage.problem(
      .tooManyRequests, "Too many attempts",
      "There have been too many sign-in attempts from your network. Wait \(wait) seconds, then try again.",
      context: self)
  }

  /// `body`'s page, or the page for a store failure: 503 with `Retry-After` while the database is
  /// out of reach, else 500 (the cause in the error log only).
  func guardedPage(_ body: () throws -> Response) -> Response {
    do { return try body() } catch {
      let plain = ClientContext.storeFailure(error, html: true)
      if plain.status == .conflict {
        return HTMLPage.problem(
          plain.status, "That changed meanwhile",
          "That changed meanwhile, so nothing was done. Please reload and try again.",
          context: self, next: ("/", "Go to the start page"))
      }
      guard plain.status == .serviceUnavailable else {
        return HTMLPage.problem(
          plain.status, "Something went wrong", "Something went wrong on our side. Please try again.",
          context: self, next: ("/", "Go to the start page"))
      }
      var page = HTMLPage.problem(
        plain.status, "Try again in a moment",
        "Band Licence cannot reach its database just now. Please try again in a moment.", context: self,
        next: ("/", "Go to the start page"))
      page.add("Retry-After", "1")
      return page
    }
  }
}
