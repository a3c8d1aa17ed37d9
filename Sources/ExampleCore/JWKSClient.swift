import CCurl

/// GETs band-edge's JWKS with libcurl: http or https only, no redirects, 5 s in all, at most
/// 64 KiB, and only a 200 counts.
public enum JWKSClient {
  /// The most bytes of JWKS read.
  static let maximumBytes = 64 << 10

  /// A `KeySet.Fetch` that GETs `url`.
  public static func fetcher(_ url: String) -> KeySet.Fetch {
    { get(url) }
  }

  /// The body of a GET of `url`, or why there is none.
  static func get(_ url: String) -> Result<[UInt8], KeySetError> {
    if let failure = be_curl_load_failure() { return .failure(.unreachable(String(cString: failure))) }
    guard let curl = be_curl_easy_init() else { return .failure(.unreachable("cannot start libcurl")) }
    defer { be_curl_easy_cleanup(curl) }
    let sink = Sink()
    let options: [CURLcode] = [
      be_curl_setopt_string(curl, CURLOPT_URL, url),
      be_curl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "http,https"),
      be_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, 5000),
      be_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1),
      be_curl_setopt_write(curl) { data, size, count, context in
        guard let data, let context else { return 0 }
        let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
        return sink.take(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
      },
      be_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque()),
    ]
    if let refused = options.first(where: { $0 != CURLE_OK }) {
      return .failure(
        .unreachable("libcurl refused an option: \(String(cString: be_curl_easy_strerror(refused)))"))
    }
    // The sink is written through an unretained pointer until perform returns.
    let result = withExtendedLifetime(sink) { be_curl_easy_perform(curl) }
    guard result == CURLE_OK else {
      return .failure(.unreachable("GET \(url): \(String(cString: be_curl_easy_strerror(result)))"))
    }
    var status = 0
    _ = withUnsafeMutablePointer(to: &status) { be_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, $0) }
    guard status == 200 else { return .failure(.unreachable("GET \(url) answered \(status)")) }
    return .success(sink.bytes)
  }

  /// The body as libcurl hands it over, refused past `maximumBytes`.
  private final class Sink {
    var bytes: [UInt8] = []

    func take(_ chunk: UnsafeRawBufferPointer) -> Bool {
      guard bytes.count + chunk.count <= JWKSClient.maximumBytes else { return false }
      bytes += chunk
      return true
    }
  }
}
