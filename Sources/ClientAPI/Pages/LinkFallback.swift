import Accounts
import Deployment
import Edge

/// The web page behind every approved app-link path (the deployment's `verifiedLinkPaths`) that
/// nothing else answers: a person who opens such a link without the app (a scanned card, a link
/// in a message) learns what it is for and how to get the app. The page is prebuilt, the same for
/// every path it covers: nothing is read from the path and nothing is echoed. No third-party link
/// or request, no referrer (the path may carry a code).
public enum LinkFallback {
  /// GET routes for the approved paths of `deployment` that `existing` does not already answer and
  /// that the router can express (literal segments and `*` segments; never `/api/` or `/.well-known/`).
  public static func routes(deployment: Deployment, stylesheet: String?, existing: [Route]) -> [Route] {
    var out: [Route] = []
    var seen = Set(existing.filter { $0.method == .get }.map(\.pattern))
    for path in deployment.verifiedLinkPaths {
      guard let pattern = routePattern(path), !seen.contains(pattern) else { continue }
      seen.insert(pattern)
      out.append(Route(.get, pattern, cacheClass: .private, fixed: page(for: path, deployment, stylesheet)))
    }
    return out
  }

  /// The router pattern for an approved link path: `*` as a whole segment binds one segment (or,
  /// last, the rest); nil for paths the router cannot express or that would cover `/api/`,
  /// `/.well-known/` or the whole site.
  static func routePattern(_ path: String) -> String? {
    guard path.hasPrefix("/"), !path.hasPrefix("/api/"), !path.hasPrefix("/.well-known/"),
      path != "/api", path != "/.well-known"
    else { return nil }
    var segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    guard let first = segments.first, !first.isEmpty, !first.contains("*") else { return nil }
    for i in segments.indices {
      let segment = segments[i]
      if segment == "*" {
        if i != segments.count - 1 { segments[i] = ":p\(i)" }
      } else if segment.contains("*") || segment.contains("?") || segment.hasPrefix(":") {
        return nil
      }
    }
    return "/" + segments.joined(separator: "/")
  }

  /// The page for links under `path`.
  static func page(for path: String, _ deployment: Deployment, _ stylesheet: String?) -> Response {
    let code = path.hasPrefix("/qr/") || path == "/qr"
    var page = HTMLPage(title: code ? "Open this code in the app" : "Open this link in the app")
    if code {
      page.html("<h1>Open this code in the Band Licence app</h1>\n")
      page.html("<p>You scanned a Band Licence code. It is read by the Band Licence app, which shows ")
      page.html("what the code stands for to the people allowed to see it.</p>\n")
    } else {
      page.html("<h1>Open this link in the Band Licence app</h1>\n")
      page.html("<p>This link is meant for the Band Licence app on a phone or tablet.</p>\n")
    }
    page.html("<h2>Get the app</h2>\n<ul>\n")
    page.html("<li>On an iPhone or iPad: search for “Band Licence” in the App Store.</li>\n")
    page.html("<li>On an Android phone or tablet: search for “Band Licence” in Google Play.</li>\n</ul>\n")
    page.html(
      "<p>Once it is installed and you have signed in, \(code ? "scan the code" : "open the link") again: ")
    page.html("it opens in the app.</p>\n")
    page.html("<p><a class=\"button\" href=\"/\">Go to the start page</a></p>\n")
    return page.response(.ok, deployment: deployment, stylesheet: stylesheet, referrerPolicy: "no-referrer")
  }
}
