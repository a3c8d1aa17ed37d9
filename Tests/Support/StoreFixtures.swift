import Accounts
import Foundation
import Store
import Synchronization

/// The test server's libpq URI (build/test starts one: `start_test_postgres` in build/lib/common.sh).
package let testPostgresURI = ProcessInfo.processInfo.environment["BAND_EDGE_TEST_POSTGRES"]

/// A wall clock for the store that tests move by hand.
package final class TestClock: Sendable {
  package init() {}
  package let seconds = Mutex(1_800_000_000)
  package func advance(_ by: Int) { seconds.withLock { $0 += by } }
  package var read: @Sendable () -> Int { { [self] in seconds.withLock { $0 } } }
}

/// A fresh store on `engine` (see `Engine.location`), the clock it reads, and where it lives (for
/// a second connection: `ClientStore(database: location.open(), ...)`).
package func makeStore(_ engine: Engine) throws -> (ClientStore, TestClock, DatabaseLocation) {
  let location = try engine.location()
  let clock = TestClock()
  return (try ClientStore(database: try location.open(), clock: clock.read), clock, location)
}

/// A store over `db` with a clock the test moves.
package func makeStore(on db: any Database) throws -> (ClientStore, TestClock) {
  let clock = TestClock()
  return (try ClientStore(database: db, clock: clock.read), clock)
}
