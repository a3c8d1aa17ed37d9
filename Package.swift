// swift-tools-version:6.0
import PackageDescription

/// band-edge: the Swift edge server of Band Licence. See docs/ and README.md.
///
/// The dependency lists below are the layering, lowest first (docs/architecture.md):
/// - Edge (the HTTP engine) and Store (the databases) know nothing of the application;
/// - Deployment (the configuration); Shell, LinkAssoc: the web app's files and the verified-link files;
/// - EdgeTesting: the in-process test client, over Edge alone (the tests' way in to a route table);
/// - Accounts: the domain, over Store; ClientAPI: HTTP over Accounts; Gateway: forwarding, over ClientAPI;
/// - ExampleCore: a reference API core for development, over Edge and Deployment (never Accounts);
/// - band-edge: the executable that composes them.
/// `build/check-layers` (run by build/test) fails when a file imports a module of this package
/// that its target does not list.
/// This directory: the linker reads a file of it (build/lib/text-order.txt) by absolute path.
let packageDirectory = String(#filePath.dropLast("/Package.swift".count))

let package = Package(
  name: "band-edge",
  products: [
    .executable(name: "band-edge", targets: ["band-edge"]),
    .executable(name: "EdgeFuzz", targets: ["EdgeFuzz"]),
    .executable(name: "EdgeFuzzResponse", targets: ["EdgeFuzzResponse"]),
    .executable(name: "EdgeFuzzH2", targets: ["EdgeFuzzH2"]),
  ],
  targets: [
    // System-library shims: Debian's -dev packages (and Linux headers Glibc leaves out).
    .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
    .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
    .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlienc", providers: [.apt(["libbrotli-dev"])]),
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CLinux"),
    .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
    // Headers only: libpq is loaded when first used (Sources/CPostgres/shim.h).
    .systemLibrary(name: "CPostgres", providers: [.apt(["libpq-dev"])]),
    // Headers only: libcurl is loaded when first used (Sources/CCurl/shim.h).
    .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),

    // The HTTP engine. Knows nothing about Band Licence.
    .target(
      name: "Edge", dependencies: ["CLinux", "COpenSSL"],
      // Exclusivity stays checked at compile time; the per-access runtime check on the
      // loop-owned connection objects is dropped in release builds (each is touched by one thread).
      swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]),
    // The in-process test client: a route table through the dispatcher, with a cookie jar. A
    // library (no Testing, no @testable), so it builds in release with everything else.
    .target(name: "EdgeTesting", dependencies: ["Edge"]),
    .target(name: "Shell", dependencies: ["Edge", "CZlib", "CBrotli", "COpenSSL"]),
    // The deployment configuration: its values, its loader and validation (Edge for JSON strings).
    .target(name: "Deployment", dependencies: ["Edge"]),
    .target(name: "LinkAssoc", dependencies: ["Edge", "Deployment"]),
    // The store: the `Database` seam, SQLite, PostgreSQL, the schema's migrations, store copy.
    .target(name: "Store", dependencies: ["CSQLite", "CPostgres", "COpenSSL"]),
    // The domain: accounts, schools, roles, sessions, invitations; authentication; mail.
    .target(
      name: "Accounts",
      dependencies: ["Store", "Edge", "Deployment", "CSQLite", "CArgon2", "COpenSSL", "CCurl"],
      plugins: ["EmbedFiles"]),
    // The client API and the server-rendered pages: HTTP only, over Accounts.
    .target(
      name: "ClientAPI", dependencies: ["Accounts", "Store", "Edge", "Deployment"],
      plugins: ["EmbedFiles"]),
    // The gateway: forwarding school-scoped client API calls to an API core, over the client API
    // (its one authenticator and JSON error shape) and Accounts (school access, the store).
    .target(
      name: "Gateway", dependencies: ["ClientAPI", "Accounts", "Store", "Edge", "Deployment", "COpenSSL"]),
    // The reference API core for development (`band-edge example-core`): verifies the gateway's
    // assertions on its own (OpenSSL, libcurl for the JWKS), over Edge and Deployment only, as an
    // API core outside this repository would.
    .target(name: "ExampleCore", dependencies: ["Edge", "Deployment", "COpenSSL", "CCurl"]),
    .executableTarget(
      name: "band-edge",
      dependencies: [
        "Edge", "Shell", "Deployment", "LinkAssoc", "Store", "Accounts", "ClientAPI", "Gateway",
        "ExampleCore",
      ],
      // The server's own memory (docs/architecture.md, "The binary"): lld packs the relocations
      // (RELR: ~8 KB, not ~1 MB read at every start) and, in release builds, places the functions
      // a server runs first (build/lib/text-order.txt, written by build/order-text; every target is
      // compiled with a section per function for it, below).
      linkerSettings: [
        .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]),
        .unsafeFlags(
          [
            "-Xlinker", "--symbol-ordering-file=\(packageDirectory)/build/lib/text-order.txt",
            "-Xlinker", "--no-warn-symbol-ordering",
          ], .when(configuration: .release)),
      ]),

    // Data compiled into a target (the one static binary has no resource bundle): the target's
    // embedded-files.txt names the files, EmbedTool turns them into Swift at build time.
    .plugin(name: "EmbedFiles", capability: .buildTool(), dependencies: ["EmbedTool"]),
    .executableTarget(name: "EmbedTool"),

    // libFuzzer targets for the HTTP/1.1 request and response parsers and the HTTP/2 session:
    // build/fuzz builds one with --sanitize=fuzzer.
    .executableTarget(name: "EdgeFuzz", dependencies: ["Edge"]),
    .executableTarget(name: "EdgeFuzzResponse", dependencies: ["Edge"]),
    .executableTarget(name: "EdgeFuzzH2", dependencies: ["Edge"]),

    .testTarget(name: "EdgeTests", dependencies: ["Edge", "EdgeTesting", "CLinux", "COpenSSL", "CNGHTTP2"]),
    .testTarget(name: "ShellTests", dependencies: ["Shell", "Edge"]),
    .testTarget(name: "DeploymentTests", dependencies: ["Deployment", "Edge"]),
    .testTarget(name: "LinkAssocTests", dependencies: ["LinkAssoc", "Deployment", "Edge"]),
    // What the store-bound suites share: the engines to run on, temporary directories, a clock.
    // A plain target (no Testing, no @testable), since release builds compile every target.
    .target(name: "TestSupport", dependencies: ["Store", "Accounts"], path: "Tests/Support"),
    .testTarget(name: "StoreTests", dependencies: ["Store", "Accounts", "TestSupport"]),
    .testTarget(
      name: "AccountsTests", dependencies: ["Accounts", "Store", "Edge", "Deployment", "TestSupport"]),
    .testTarget(
      name: "ClientAPITests",
      dependencies: [
        "ClientAPI", "Accounts", "Store", "Edge", "EdgeTesting", "Deployment", "LinkAssoc", "TestSupport",
      ]),
    .testTarget(
      name: "GatewayTests",
      dependencies: [
        "Gateway", "ClientAPI", "Accounts", "Store", "Edge", "EdgeTesting", "Deployment", "TestSupport",
      ]),
    // The example core's tests sign with the gateway's signer: what band-edge sends, checked by
    // what a core verifies.
    .testTarget(
      name: "ExampleCoreTests", dependencies: ["ExampleCore", "Gateway", "Accounts", "Edge", "Deployment"]),
    .testTarget(name: "EmbedFilesTests", exclude: ["Fixtures"], plugins: ["EmbedFiles"]),
  ]
)

// A section per function in release builds, so that the link can order functions one by one.
for target in package.targets where target.type == .regular || target.type == .executable {
  target.swiftSettings =
    (target.swiftSettings ?? []) + [
      .unsafeFlags(["-Xfrontend", "-function-sections"], .when(configuration: .release))
    ]
}
