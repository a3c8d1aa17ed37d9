import Edge

#if canImport(Glibc)
  import Glibc
#endif

let usage = """
  Usage: band-edge <command> [options]

  The edge server of Band Licence.

  Commands:
    serve       serve HTTP until SIGTERM (band-edge serve --help)
    shell build build the public shell from Public/ (band-edge shell --help)
    config check validate the deployment configuration (band-edge config --help)
    links print print a verified-link file as served (apple|android)
    admin       accounts, schools, memberships, sessions, audit (band-edge admin --help)
    example-core a reference API core for development (band-edge example-core --help)
    help        this text

  Exit status: 0 success; 1 failure at run time; 2 usage error. Errors are one line on stderr.
  """

/// Prints one error line on stderr.
func fail(_ message: String) {
  var line = Array("band-edge: error: \(message)\n".utf8)
  _ = write(2, &line, line.count)
}

var words = Array(CommandLine.arguments.dropFirst())
let command = words.isEmpty ? "help" : words.removeFirst()
let status: Int32
/// Each command's entry point, by its word.
let commands: [String: (Arguments) throws(UsageError) -> Int32] = [
  "serve": ServeCommand.run, "shell": ShellCommand.run, "config": ConfigCommand.check,
  "links": ConfigCommand.links, "admin": AdminCommand.run, "example-core": ExampleCoreCommand.run,
]
do throws(UsageError) {
  if ["help", "--help", "-h"].contains(command) {
    print(usage)
    status = 0
  } else if let run = commands[command] {
    status = try run(Arguments(words))
  } else {
    throw UsageError("unknown command '\(command)'; see band-edge help")
  }
} catch {
  fail(error.message)
  status = 2
}
// Background threads (store loops, the change listener) stop before exit's clean-up handlers run
// under them. One still in a step at the limit (a relay or store not answering) is left: the
// process ends without those handlers, as it would have after its last write.
if !Background.process.end(within: .seconds(5)) {
  Log.event("warning", "background_unfinished", [])
  fflush(nil)  // every stream: print()'s stdout holds a command's output
  _exit(status)
}
exit(status)
