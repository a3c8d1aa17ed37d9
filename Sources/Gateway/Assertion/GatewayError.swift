/// Why the gateway could not make, keep or use a signing key. The message is for operators and
/// logs; a request that meets one is answered as a server failure, never with this text.
public enum GatewayError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The key-encryption key file at `path` cannot be used, and why (what to do is in the reason).
  case keyFile(path: String, reason: String)
  /// OpenSSL refused an operation (`operation` names it); nothing was signed or made.
  case crypto(String)
  /// A signing key's bytes are not an Ed25519 key (a private key is 32 bytes, RFC 8032 §5.1.5).
  case invalidKey(String)
  /// A setting outside what the gateway allows (an assertion lifetime over 60 s).
  case configuration(String)

  public var description: String {
    switch self {
    case .keyFile(let path, let reason): "the key-encryption key file \(path) \(reason)"
    case .crypto(let operation): "OpenSSL failed to \(operation)"
    case .invalidKey(let reason): "invalid signing key: \(reason)"
    case .configuration(let reason): reason
    }
  }
}
