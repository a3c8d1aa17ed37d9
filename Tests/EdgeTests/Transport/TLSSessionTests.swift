import COpenSSL
import Glibc
import Testing

@testable import Edge

/// An idle TLS connection keeps no record buffers (SSL_MODE_RELEASE_BUFFERS: about 34 KiB
/// allocated, 9 KiB resident, per connection), and records still arrive whole and in order when
/// several come in one read (read ahead) or a write is larger than a record.
@Suite("TLS session")
struct TLSSessionTests {
  /// A throwaway Ed25519 key and self-signed certificate for `localhost`, as PEM files.
  static func certificate() -> (certificate: String, key: String) {
    let directory = "/tmp/edge-tls-session-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    precondition(mkdir(directory, 0o700) == 0, "mkdir \(directory)")
    let keyContext = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil)
    defer { EVP_PKEY_CTX_free(keyContext) }
    var key: OpaquePointer?
    precondition(EVP_PKEY_keygen_init(keyContext) == 1 && EVP_PKEY_keygen(keyContext, &key) == 1, "keygen")
    defer { EVP_PKEY_free(key) }
    let x509 = X509_new()
    defer { X509_free(x509) }
    _ = X509_set_version(x509, 2)
    _ = ASN1_INTEGER_set(X509_get_serialNumber(x509), 1)
    _ = X509_gmtime_adj(X509_getm_notBefore(x509), -60)
    _ = X509_gmtime_adj(X509_getm_notAfter(x509), 3600)
    let name = X509_get_subject_name(x509)
    _ = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, "localhost", -1, -1, 0)
    _ = X509_set_issuer_name(x509, name)
    _ = X509_set_pubkey(x509, key)
    precondition(X509_sign(x509, key, nil) > 0, "sign")
    let paths = (certificate: directory + "/server.pem", key: directory + "/server.key")
    let certificateFile = fopen(paths.certificate, "w")
    precondition(PEM_write_X509(certificateFile, x509) == 1, "write certificate")
    fclose(certificateFile)
    let keyFile = fopen(paths.key, "w")
    precondition(PEM_write_PrivateKey(keyFile, key, nil, nil, 0, nil, nil) == 1, "write key")
    fclose(keyFile)
    return paths
  }

  static func remove(_ paths: (certificate: String, key: String)) {
    unlink(paths.certificate)
    unlink(paths.key)
    rmdir(String(paths.key.dropLast("/server.key".count)))
  }

  /// Reads from the server session until it wants the socket again.
  static func readAll(_ session: TLSSession) -> [UInt8] {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1000)
    while true {
      let outcome = chunk.withUnsafeMutableBytes { session.read($0) }
      guard case .bytes(let n) = outcome else { return out }
      out += chunk[0..<n]
    }
  }

  @Test("the context releases idle record buffers; coalesced and large records arrive whole, in order")
  func releasedBuffersKeepRecords() throws {
    let paths = Self.certificate()
    defer { Self.remove(paths) }
    let context = try TLSContext(certificate: paths.certificate, key: paths.key, http2: true)
    let mode = UInt(SSL_CTX_ctrl(context.context, SSL_CTRL_MODE, 0, nil))
    #expect(mode & UInt(SSL_MODE_RELEASE_BUFFERS) != 0)

    let (serverFD, clientFD) = TransportTests.pair()
    defer {
      close(serverFD)
      close(clientFD)
    }
    let session = try #require(context.session(fd: serverFD))
    let clientContext = try #require(SSL_CTX_new(TLS_client_method()))
    defer { SSL_CTX_free(clientContext) }
    let client = try #require(SSL_new(clientContext))
    defer { SSL_free(client) }
    _ = SSL_set_fd(client, clientFD)
    _ = fcntl(clientFD, F_SETFL, fcntl(clientFD, F_GETFL) | O_NONBLOCK)
    var clientDone = false
    for _ in 0..<20 where !(clientDone && session.handshakeDone) {
      if !clientDone { clientDone = SSL_connect(client) == 1 }
      if !session.handshakeDone { _ = session.handshake() }
    }
    try #require(clientDone && session.handshakeDone)

    // Three records in one read, the middle one larger than the server's 1,000-byte reads.
    let sent = [UInt8](repeating: 0x61, count: 100) + [UInt8](repeating: 0x62, count: 20000) + [0x63]
    for part in [sent[0..<100], sent[100..<20100], sent[20100...]] {
      let n = Array(part).withUnsafeBytes { SSL_write(client, $0.baseAddress, Int32($0.count)) }
      #expect(n == part.count)
    }
    #expect(Self.readAll(session) == sent)

    // A write of several records (the buffer is released after it and set up again for the next).
    for round in 0..<2 {
      let reply = [UInt8](repeating: UInt8(0x30 + round), count: 40000)
      var offset = 0
      while offset < reply.count {
        let written = reply[offset...].withUnsafeBytes { session.write($0) }
        guard case .bytes(let n) = written else {
          Issue.record("server write: \(written)")
          return
        }
        offset += n
      }
      var received: [UInt8] = []
      var chunk = [UInt8](repeating: 0, count: 16384)
      while received.count < reply.count {
        let n = chunk.withUnsafeMutableBytes { SSL_read(client, $0.baseAddress, Int32($0.count)) }
        guard n > 0 else { break }
        received += chunk[0..<Int(n)]
      }
      #expect(received == reply)
    }
  }
}
