import COpenSSL

#if canImport(Glibc)
  import Glibc
#endif

/// How the loops speak TLS to one upstream: a client context that verifies the upstream's
/// certificate against the given authorities (or the system's) and its name or address, TLS 1.2
/// at least. Equal when made from the same settings, so a reload that keeps them keeps the pool.
///
/// `@unchecked Sendable`: the `SSL_CTX` is configured in `init` and only read afterwards
/// (`SSL_new` takes its own reference), which OpenSSL allows from any thread.
public final class UpstreamTLS: @unchecked Sendable, Equatable {
  let context: OpaquePointer
  /// The name sent (SNI) and verified; an IP literal is verified as an address and sent no SNI.
  public let serverName: String
  public let caFile: String?

  /// A context verifying `serverName` against `caFile` (PEM), or the system's authorities when nil.
  public init(serverName: String, caFile: String?) throws(TLSError) {
    self.serverName = serverName
    self.caFile = caFile
    guard let context = SSL_CTX_new(TLS_client_method()) else {
      throw TLSError("cannot create a TLS context")
    }
    self.context = context
    guard SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1 else {
      SSL_CTX_free(context)
      throw TLSError("cannot require TLS 1.2")
    }
    let loaded =
      if let caFile { SSL_CTX_load_verify_locations(context, caFile, nil) } else {
        SSL_CTX_set_default_verify_paths(context)
      }
    guard loaded == 1 else {
      SSL_CTX_free(context)
      throw TLSError("cannot read the certificate authorities in \(caFile ?? "the system's store")")
    }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    // A close without close_notify reads as a close: the response's framing decides (OpenSSL 3's
    // SSL_OP_IGNORE_UNEXPECTED_EOF, bit 7, a macro Swift cannot import).
    _ = SSL_CTX_set_options(context, UInt64(1) << 7)
    // A write that is retried may come from a moved buffer, and may complete in parts.
    _ = SSL_CTX_ctrl(
      context, SSL_CTRL_MODE, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
  }

  deinit { SSL_CTX_free(context) }

  public static func == (a: UpstreamTLS, b: UpstreamTLS) -> Bool {
    a.serverName == b.serverName && a.caFile == b.caFile
  }

  /// A client session on connected socket `fd`, set to verify the upstream's name; nil when
  /// OpenSSL cannot make one.
  func session(fd: Int32) -> OpaquePointer? {
    guard let ssl = SSL_new(context) else { return nil }
    SSL_set_fd(ssl, fd)
    if let parameters = SSL_get0_param(ssl) {
      if SocketAddress("\(serverName):1") != nil || SocketAddress("[\(serverName)]:1") != nil {
        X509_VERIFY_PARAM_set1_ip_asc(parameters, serverName)
      } else {
        X509_VERIFY_PARAM_set1_host(parameters, serverName, 0)
        _ = serverName.withCString {
          SSL_ctrl(
            ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
            UnsafeMutableRawPointer(mutating: $0))
        }
      }
    }
    SSL_set_connect_state(ssl)
    return ssl
  }
}
