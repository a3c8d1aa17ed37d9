import Edge
import ExampleCore
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// `band-edge example-core`: the reference API core, for development only.
enum ExampleCoreCommand {
  static let help = """
    Usage: band-edge example-core [options]

    A small reference API core for development: it answers the routes config/development.json
    forwards to the upstream "core" for every school (one fictional roster), and verifies every
    request's Band-Licence-Assertion as docs/gateway.md says (a 401 names the check that failed).
    It keeps everything in memory. It refuses to start unless BAND_LICENCE_ENV and the --config
    file (or BAND_LICENCE_CONFIG) are development or not given.

      --listen ADDR     where to listen, loopback only (default 127.0.0.1:8081)
      --jwks URL        band-edge's JWKS, fetched on the first request and again on an unknown kid
                        at most every 30 s (default http://127.0.0.1:8080/.well-known/band-licence/jwks.json)
      --issuer ORIGIN   the iss to accept: band-edge's origin (default http://127.0.0.1:8080)
      --audience NAME   the aud to accept: this core's upstream name in band-edge's configuration
                        (default core)
      --config FILE     a deployment file whose "environment" must be development

      GET  /api/client/v1/schools/:schoolId/students     the roster (read_only and up)
      GET  /api/client/v1/schools/:schoolId/attendance   the marks recorded (read_only and up)
      POST /api/client/v1/schools/:schoolId/attendance   {"studentId","date","status"} (teacher and up)

    One line per request on standard error. Runs until stopped (SIGINT or SIGTERM).
    Exit status: 1 refused (one line on stderr says why); 2 usage error.
    """

  /// Reads the flags, checks the environment, then serves until the process is stopped.
  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    var settings = CoreSettings()
    var configPath = ProcessEnvironment.value("BAND_LICENCE_CONFIG")
    while let word = arguments.next() {
      let (flag, inline) = Arguments.split(word)
      switch flag {
      case "--listen":
        let text = try arguments.value(of: flag, inline: inline)
        guard let address = SocketAddress(text) else {
          throw UsageError("--listen takes HOST:PORT, not '\(text)'")
        }
        settings.listen = address
      case "--jwks": settings.jwks = try arguments.value(of: flag, inline: inline)
      case "--issuer": settings.issuer = try arguments.value(of: flag, inline: inline)
      case "--audience": settings.audience = try arguments.value(of: flag, inline: inline)
      case "--config": configPath = try arguments.value(of: flag, inline: inline)
      case "--help", "-h":
        print(help)
        return 0
      default: throw UsageError("unknown example-core option '\(word)'; see band-edge example-core --help")
      }
    }
    if let problem = settings.problems.first { throw UsageError(problem) }
    let config = configPath.flatMap { FileManager.default.contents(atPath: $0) }.map { Array($0) }
    if let configPath, config == nil {
      fail("the config file \(configPath) cannot be read")
      return 1
    }
    if let refusal = CoreSettings.refusal(
      environment: ProcessEnvironment.value("BAND_LICENCE_ENV"), config: config, configName: configPath ?? "")
    {
      fail(refusal)
      return 1
    }
    return serve(settings)
  }

  /// Listens and serves; 1 when the address cannot be listened on.
  static func serve(_ settings: CoreSettings) -> Int32 {
    let log: @Sendable (String) -> Void = { line in
      var bytes = Array("example-core: \(line)\n".utf8)
      _ = write(2, &bytes, bytes.count)
    }
    do throws(SystemError) {
      let server = try settings.server(log: log)
      log("listening on http://\(server.address), issuer \(settings.issuer), audience \(settings.audience)")
      server.run()
      return 1
    } catch {
      fail("\(error)")
      return 1
    }
  }
}
