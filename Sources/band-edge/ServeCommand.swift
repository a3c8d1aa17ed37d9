import Edge
import Shell

#if canImport(Glibc)
  import Glibc
#endif

/// `band-edge serve`: parse flags into a server configuration and run it.
enum ServeCommand {
  static let help = """
    Usage: band-edge serve [options]

    Serves HTTP/1.1 until SIGTERM or SIGINT, then drains: stops accepting, finishes what is in
    flight, closes idle connections and exits within --drain-timeout. SIGHUP reloads.

    Listening and threads:
      --listen ADDR           numeric host:port, repeatable (default 127.0.0.1:8080; port 0 picks one)
      --threads N             event loops, one per core by default (now \(ServerConfiguration.cores))
      --pool-threads N        worker threads for blocking routes (default \(ServerConfiguration().poolThreads))
      --pool-queue N          blocking requests that may wait before new ones get 503 (default 256)
      --drain-timeout S       seconds allowed for draining on SIGTERM (default 10)
      --no-access-log         do not write the JSON access log to stdout

    Limits (see docs/limits.md):
      --max-target-bytes N    longest request-target, else 414 (default 8192)
      --max-header-bytes N    header section size, else 431 (default 16384)
      --max-header-count N    header field lines, else 431 (default 100)
      --max-body-bytes N      request body size, else 413 (default 1048576)
      --max-connections N     open connections per loop (default 8192)
      --head-timeout S        to receive a request head, from its first byte (default 10)
      --body-timeout S        longest pause while receiving a body (default 10)
      --idle-timeout S        keep-alive wait for the next request (default 60)
      --write-timeout S       longest pause while a client reads a response (default 30)
      --linger-timeout S      draining unread input before closing (default 2)

    Content:
      --shell DIR             the built public shell to serve (default shell-build; see band-edge shell build)

    Testing:
      --test-routes           add /_test/sleep, /_test/echo and /_test/bytes (for the test suites)

    Exit status: 0 stopped after draining; 1 could not start (for example the address is in use);
    2 usage error.
    """

  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    var configuration = ServerConfiguration()
    var listen: [SocketAddress] = []
    var testRoutes = false
    var shellDirectory = ShellCommand.defaultDestination
    while let word = arguments.next() {
      let (flag, inline) = split(word)
      func value() throws(UsageError) -> String { try arguments.value(of: flag, inline: inline) }
      switch flag {
      case "--help", "-h":
        print(help)
        return 0
      case "--listen":
        let text = try value()
        guard let address = SocketAddress(text) else {
          throw UsageError(
            "--listen takes a numeric host:port such as 127.0.0.1:8080 or [::1]:8080, not '\(text)'")
        }
        listen.append(address)
      case "--threads": configuration.threads = try Arguments.integer(value(), flag, min: 1, max: 256)
      case "--pool-threads":
        configuration.poolThreads = try Arguments.integer(value(), flag, min: 1, max: 1024)
      case "--pool-queue":
        configuration.poolQueue = try Arguments.integer(value(), flag, min: 0, max: 1_000_000)
      case "--drain-timeout": configuration.drainTimeout = try Arguments.seconds(value(), flag)
      case "--no-access-log": configuration.accessLog = false
      case "--max-target-bytes":
        configuration.limits.maxTargetBytes = try Arguments.integer(value(), flag, min: 64, max: 1 << 20)
      case "--max-header-bytes":
        configuration.limits.maxHeaderBytes = try Arguments.integer(value(), flag, min: 256, max: 1 << 20)
      case "--max-header-count":
        configuration.limits.maxHeaderCount = try Arguments.integer(value(), flag, min: 1, max: 10_000)
      case "--max-body-bytes":
        configuration.limits.maxBodyBytes = try Arguments.integer(value(), flag, min: 0, max: 1 << 30)
      case "--max-connections":
        configuration.limits.maxConnectionsPerLoop = try Arguments.integer(
          value(), flag, min: 1, max: 1_000_000)
      case "--head-timeout": configuration.limits.headTimeout = try Arguments.seconds(value(), flag)
      case "--body-timeout": configuration.limits.bodyTimeout = try Arguments.seconds(value(), flag)
      case "--idle-timeout": configuration.limits.idleTimeout = try Arguments.seconds(value(), flag)
      case "--write-timeout": configuration.limits.writeTimeout = try Arguments.seconds(value(), flag)
      case "--linger-timeout": configuration.limits.lingerTimeout = try Arguments.seconds(value(), flag)
      case "--test-routes": testRoutes = true
      case "--shell": shellDirectory = try value()
      default:
        throw UsageError("serve does not know '\(word)'; see band-edge serve --help")
      }
    }
    if !listen.isEmpty { configuration.listen = listen }

    let shell: ShellCatalog
    do {
      shell = try ShellCatalog.load(directory: shellDirectory, lastModified: Int(time(nil)))
    } catch {
      fail(error.description)
      return 1
    }
    let routes = EdgeRoutes.health() + shell.routes + (testRoutes ? EdgeRoutes.testing() : [])
    let router: Router
    do {
      router = try Router(routes)
    } catch {
      fail("the route table is invalid: \(error)")
      return 1
    }
    let server = Server(configuration: configuration, router: router)
    do {
      return try server.run(reload: {
        Log.event("info", "reload_requested", [("result", "nothing to reload yet")])
        return nil
      })
    } catch {
      fail("could not start: \(error)")
      return 1
    }
  }

  private static func split(_ word: String) -> (String, String?) {
    guard word.hasPrefix("--"), let eq = word.firstIndex(of: "=") else { return (word, nil) }
    return (String(word[..<eq]), String(word[word.index(after: eq)...]))
  }
}
