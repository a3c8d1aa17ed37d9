import Synchronization
import Testing

@testable import Edge

/// Before the process exits, its background threads stop and are waited for (a thread left in
/// libpq or OpenSSL under exit's clean-up handlers crashes the process).
@Suite("Background threads")
struct BackgroundTests {
  final class Flag: Sendable {
    let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
  }

  @Test("ending wakes a thread paused for an hour, and waits until it has returned")
  func endWakesPauses() {
    let group = Background()
    let returned = Flag()
    group.start {
      while !group.isEnding { group.pause(.seconds(3600)) }
      returned.set()
    }
    // Were a pause not woken, the hour would outlast the limit and `end` say false.
    #expect(group.end(within: .seconds(30)))
    #expect(returned.isSet)
  }

  @Test("a thread still in its step at the limit is reported; once it returns, ending succeeds")
  func stuckStep() {
    let group = Background()
    let (release, inStep) = (Flag(), Flag())
    group.start {
      inStep.set()
      while !release.isSet { group.pause(.milliseconds(1), unless: { false }) }
    }
    while !inStep.isSet { Background().pause(.milliseconds(1)) }
    #expect(!group.end(within: .milliseconds(20)))
    release.set()
    #expect(group.end(within: .seconds(30)))
  }

  @Test("an owner's stop ends a pause early")
  func ownerStop() {
    let group = Background()
    let (stop, returned) = (Flag(), Flag())
    group.start {
      group.pause(.seconds(3600), unless: { stop.isSet })
      returned.set()
    }
    stop.set()
    // Not ended: only the owner's stop can have woken it.
    let deadline = ContinuousClock.now + .seconds(30)
    while !returned.isSet, ContinuousClock.now < deadline { Background().pause(.milliseconds(1)) }
    #expect(returned.isSet)
    #expect(group.end(within: .seconds(30)))
  }
}
