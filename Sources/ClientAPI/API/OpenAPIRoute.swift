import Accounts
import Edge

extension OpenAPIDocument {
  /// `GET /api/client/v1/openapi.json`: the document, as prebuilt bytes.
  public static var routes: [Route] {
    [
      Route(
        .get, "/api/client/v1/openapi.json", cacheClass: .private,
        fixed: Response(
          status: .ok, headers: [("Content-Type", "application/json; charset=utf-8")],
          body: .bytes(Array(json.utf8))))
    ]
  }
}
