import Deployment
import Edge
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

@Suite("Error pages, link fallbacks and the shared page frame (in-process)")
struct PageFrameTests {
  static let development = try! DeploymentLoader.load(environment: [:], configPath: nil).get()

  @Test(
    "every error page is a whole page: lang, title, the shell's header and footer, a link home, the label",
    arguments: [400, 404, 405, 408, 413, 414, 429, 431, 500, 503, 501])
  func errorPages(code: Int) throws {
    let render = ErrorPages.renderer(deployment: Self.development, stylesheet: "/styles.test.css")
    let response = render(Status(code, ""), "The engine's sentence.")
    let page = text(response)
    #expect(response.status.code == code)
    #expect(response.header("Content-Type") == "text/html; charset=utf-8")
    #expect(response.header("Content-Security-Policy")?.contains("frame-ancestors 'none'") == true)
    #expect(response.header("X-Content-Type-Options") == "nosniff")
    #expect(page.hasPrefix("<!doctype html>\n<html lang=\"en-GB\""))
    #expect(page.contains("<title>[Development] ") && page.contains(" · Band Licence</title>"))
    for part in [
      "<link rel=\"stylesheet\" href=\"/styles.test.css\">", "<link rel=\"icon\" href=\"/favicon.ico\"",
      "<link rel=\"manifest\" href=\"/manifest.webmanifest\">", "<header class=\"bar\">",
      "<p class=\"deployment\">Development</p>", "<footer class=\"foot\">",
      "href=\"/\">Go to the start page</a>",
      "<a class=\"skip\" href=\"#main\">",
    ] {
      #expect(page.contains(part), "\(code) lacks \(part)")
    }
    let (title, own) = ErrorPages.wording(Status(code, ""))
    #expect(page.contains(own ?? "The engine&#39;s sentence."))
    // Only a fault of ours is called one.
    #expect(
      (code >= 500 && code != 501 && code != 503) == (title == "Something went wrong"), "\(code): \(title)")
  }

  @Test("a production page carries no label")
  func productionFrame() {
    var production = Self.development
    production.environment = .production
    production.label = "Production"
    let page = text(ErrorPages.renderer(deployment: production, stylesheet: nil)(.notFound, "Not found."))
    #expect(
      !page.contains("class=\"deployment\"") && page.contains("<title>Page not found · Band Licence</title>"))
  }

  @Test(
    "approved link paths become router patterns where the router can express them",
    arguments: [
      ("/qr/*", "/qr/*"), ("/native/callback", "/native/callback"), ("/cards/*/view", "/cards/:p1/view"),
      ("/*", nil), ("/api/client/v1/*", nil), ("/.well-known/x", nil), ("/qr-*", nil), ("/a/:b", nil),
      ("/", nil), ("/api", nil),
    ] as [(String, String?)])
  func linkPatterns(path: String, pattern: String?) {
    #expect(LinkFallback.routePattern(path) == pattern)
  }

  @Test("a fallback page for every approved path nothing else answers: prebuilt, no-store, nothing echoed")
  func linkFallbacks() throws {
    var deployment = Self.development
    deployment.verifiedLinkPaths = ["/native/callback", "/qr/*", "/cards/*/view"]
    let existing = [Route(.get, "/native/callback", cacheClass: .private, fixed: .text(.ok, "callback\n"))]
    let routes = LinkFallback.routes(deployment: deployment, stylesheet: nil, existing: existing)
    #expect(routes.map(\.pattern) == ["/qr/*", "/cards/:p1/view"])
    #expect(routes.allSatisfy { $0.cacheClass == .private && $0.method == .get })
    let router = try Router(existing + routes)
    for target in ["/qr/ABC123%3Cscript%3E", "/qr/<b>x</b>", "/cards/42/view"] {
      guard case .found(let route, _, _) = router.match(.get, target), case .fixed = route.handler else {
        Issue.record("\(target) is not answered by a prebuilt page")
        continue
      }
    }
    // The routes are prebuilt from these pages: nothing of a request can reach them.
    for path in ["/qr/*", "/cards/*/view"] {
      let response = LinkFallback.page(for: path, deployment, nil)
      let page = text(response)
      #expect(response.status == .ok)
      #expect(response.header("Referrer-Policy") == "no-referrer")
      #expect(response.header("Content-Security-Policy")?.hasPrefix("default-src 'none'") == true)
      #expect(page.contains("App Store") && page.contains("Google Play"))
      #expect(!page.contains("http://") && !page.contains("https://"), "no third-party address")
    }
    #expect(
      text(LinkFallback.page(for: "/qr/*", deployment, nil)).contains("You scanned a Band Licence code"))
  }

  @Test(
    "return paths after sign-in: same-origin paths only",
    arguments: [
      ("/account", "/account"), ("/", "/"), ("/account/delete?x=1#y", "/account/delete?x=1#y"),
      ("//evil.example/", nil), ("/\\evil.example", nil), ("https://evil.example/", nil),
      ("evil.example", nil),
      ("/\t/evil.example", nil), ("/%0a", "/%0a"), ("/a\\b", nil), ("/\u{7F}", nil), ("/é", nil), ("", nil),
      ("javascript:alert(1)", nil), (" /account", nil), ("/a b", nil),
      ("/a\"><script>", "/a%22%3E%3Cscript%3E"), ("/a{b}|c^`", "/a%7Bb%7D%7Cc%5E%60"),
    ] as [(String, String?)])
  func returnPaths(text: String, expected: String?) {
    #expect(WebPages.returnPath(text) == expected)
  }

  @Test(
    "the user agent's browser and system, from a fixed vocabulary",
    arguments: [
      (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
        "Chrome on Linux"
      ),
      (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
        "Firefox on Windows"
      ),
      (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
        "Safari on iPhone"
      ),
      (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 Edg/131.0",
        "Edge on Windows"
      ),
      (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Mobile Safari/537.36",
        "Chrome on Android"
      ),
      ("curl/8.5.0", nil), ("<script>", nil),
    ] as [(String, String?)])
  func browserLabels(userAgent: String, expected: String?) {
    #expect(BrowserLabel.summary(userAgent: userAgent) == expected)
  }
}
