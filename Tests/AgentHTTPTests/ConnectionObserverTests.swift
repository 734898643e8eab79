import AgentCore
@testable import AgentHTTP
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// The connection observer keeps one entry per live registration, runs each action once
/// when the client goes (the input's end, an error, the channel's close), and runs late
/// registrations at once.
struct ConnectionObserverTests {
    @Test func cancelledRegistrationsLeaveNothingBehind() throws {
        let channel = EmbeddedChannel()
        let observer = ConnectionObserver(watching: channel)
        let runs = Mutex(0)
        // A keep-alive connection serving many waits, one after another.
        for _ in 0..<1000 {
            let registration = observer.whenGone { runs.withLock { $0 += 1 } }
            registration.cancel()
        }
        #expect(observer.registrationCount == 0)
        observer.inputClosed()
        #expect(runs.withLock { $0 } == 0, "cancelled actions never run")
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    @Test func theClientLeavingRunsEachActionOnce() throws {
        let channel = EmbeddedChannel()
        let observer = ConnectionObserver(watching: channel)
        let runs = Mutex(0)
        _ = observer.whenGone { runs.withLock { $0 += 1 } }
        _ = observer.whenGone { runs.withLock { $0 += 10 } }
        observer.inputClosed()
        #expect(runs.withLock { $0 } == 11)
        #expect(observer.registrationCount == 0)
        // The close that follows does not run them again; a registration after it runs at once.
        _ = try? channel.finish(acceptAlreadyClosed: true)
        #expect(runs.withLock { $0 } == 11)
        let late = observer.whenGone { runs.withLock { $0 += 100 } }
        #expect(runs.withLock { $0 } == 111)
        late.cancel()
    }

    @Test func anErrorOrACloseCountsAsGone() throws {
        for close in [false, true] {
            let channel = EmbeddedChannel()
            let observer = ConnectionObserver(watching: channel)
            let ran = Mutex(false)
            _ = observer.whenGone { ran.withLock { $0 = true } }
            if close {
                _ = try? channel.finish(acceptAlreadyClosed: true)
            } else {
                observer.errorCaught(ChannelError.ioOnClosedChannel)
            }
            #expect(ran.withLock { $0 }, close ? "close" : "error")
            _ = try? channel.finish(acceptAlreadyClosed: true)
        }
    }
}
