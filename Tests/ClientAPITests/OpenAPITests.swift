import Edge
import Foundation
import LinkAssoc
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

@Suite("The OpenAPI document")
struct OpenAPITests {
  static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("docs/client-api-v1.openapi.json")

  @Test("the served document is the repository's file byte for byte (Plugins/EmbedFiles compiles it in)")
  func embedded() throws {
    let file = try Data(contentsOf: Self.file)
    #expect(
      Data(OpenAPIDocument.json.utf8) == file, "\(OpenAPIDocument.json.utf8.count) bytes, not \(file.count)")
    let route = try #require(OpenAPIDocument.routes.first)
    guard case .fixed(let prebuilt) = route.handler else {
      Issue.record("the document is not a prebuilt response")
      return
    }
    let served = Data(prebuilt.response.body.contents)
    #expect(served == file, "\(served.count) bytes served, not \(file.count)")
  }

  @Test("every /api/ route in the router is documented, and every documented operation is routed")
  func coverage() throws {
    let f = try SessionFixture(.sqlite)  // the routes only: no store is read
    let context = f.pages.context
    let router = try Router(
      SessionAPI(context).routes + WebPages(context).routes + NativeSignIn(context).routes
        + SchoolsAPI(context).routes
        + AccountAPI(context).routes
        + OpenAPIDocument.routes
        + LinkFiles(context.deployment).routes(maxAge: 60))
    let routed = Set(
      router.routes.filter { $0.pattern.hasPrefix("/api/") }.map { route in
        let path = route.pattern.split(separator: "/", omittingEmptySubsequences: false).map {
          $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0)
        }.joined(separator: "/")
        return "\(route.method.rawValue.lowercased()) \(path)"
      })
    let document = try #require(
      try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any])
    let paths = try #require(document["paths"] as? [String: [String: Any]])
    // The forwarding contract (`x-forwarded`) is generic: its routes come from the configuration.
    let documented = Set(
      paths.flatMap { path, operations in
        operations.filter { ($0.value as? [String: Any])?["x-forwarded"] as? Bool != true }.keys.map {
          "\($0) \(path)"
        }
      })
    let forwarded = try #require(paths["/api/client/v1/schools/{schoolId}/{forwardedPath}"])
    #expect(Set(forwarded.keys) == ["get", "head", "post", "put", "patch", "delete"])
    #expect(routed == documented)
    #expect(document["openapi"] as? String == "3.1.0")
  }
}
