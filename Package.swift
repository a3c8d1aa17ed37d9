// swift-tools-version:6.0
import PackageDescription

/// band-edge: the Swift edge server of Band Licence. See docs/ and README.md.
let package = Package(
  name: "band-edge",
  products: [
    .executable(name: "band-edge", targets: ["band-edge"]),
    .executable(name: "EdgeFuzz", targets: ["EdgeFuzz"]),
  ],
  targets: [
    // System-library shims: Debian's -dev packages (and Linux headers Glibc leaves out).
    .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
    .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
    .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlienc", providers: [.apt(["libbrotli-dev"])]),
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CLinux"),
    .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
    .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
    .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),

    // The HTTP engine. Knows nothing about Band Licence.
    .target(
      name: "Edge", dependencies: ["CLinux", "COpenSSL", "CNGHTTP2"],
      // Exclusivity stays checked at compile time; the per-access runtime check on the
      // loop-owned connection objects is dropped in release builds (each is touched by one thread).
      swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]),
    .target(name: "Shell", dependencies: ["Edge", "CZlib", "CBrotli", "COpenSSL"]),
    // The deployment configuration: its values, its loader and validation. Needs no HTTP.
    .target(name: "Deployment"),
    .target(name: "LinkAssoc", dependencies: ["Edge", "Deployment"]),
    .target(
      name: "ClientAPI",
      dependencies: ["Edge", "Deployment", "CSQLite", "CPostgres", "CArgon2", "COpenSSL", "CCurl"]),
    .executableTarget(
      name: "band-edge", dependencies: ["Edge", "Shell", "Deployment", "LinkAssoc", "ClientAPI"]),

    // libFuzzer target for the HTTP/1.1 parser: build/fuzz builds it with --sanitize=fuzzer.
    .executableTarget(name: "EdgeFuzz", dependencies: ["Edge"]),

    .testTarget(name: "EdgeTests", dependencies: ["Edge", "CNGHTTP2"]),
    .testTarget(name: "ShellTests", dependencies: ["Shell", "Edge"]),
    .testTarget(name: "DeploymentTests", dependencies: ["Deployment"]),
    .testTarget(name: "LinkAssocTests", dependencies: ["LinkAssoc", "Deployment", "Edge"]),
    .testTarget(name: "ClientAPITests", dependencies: ["ClientAPI", "Edge", "Deployment", "LinkAssoc"]),
  ]
)
