import Edge
import EdgeTesting

/// What the page tests do as a person at a browser would.
extension InProcessClient {
  /// Signs in through the form: its page, then the POST with its CSRF token.
  mutating func signIn(_ email: String, _ password: String) -> Response {
    let form = send(.get, "/sign-in")
    return send(
      .post, "/sign-in", form: [("csrf", csrfToken(in: form)), ("email", email), ("password", password)])
  }
}

/// The CSRF token in a page's first form ("" when it has none).
func csrfToken(in response: Response) -> String {
  let page = String(decoding: response.body.contents, as: UTF8.self)
  guard let start = page.firstRange(of: "name=\"csrf\" value=\"") else { return "" }
  return String(page[start.upperBound...].prefix { $0 != "\"" })
}
