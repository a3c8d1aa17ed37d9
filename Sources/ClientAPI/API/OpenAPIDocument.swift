/// The client API's OpenAPI 3.1 document, served at `/api/client/v1/openapi.json`: the file
/// `docs/client-api-v1.openapi.json`, compiled in by Plugins/EmbedFiles (see embedded-files.txt).
public enum OpenAPIDocument {
  /// The document, the file's text exactly.
  public static let json: String = EmbeddedFiles.openAPIDocument
}
