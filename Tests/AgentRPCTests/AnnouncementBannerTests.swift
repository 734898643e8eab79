import AgentCore
import AgentProto
@testable import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import DRPC
import Foundation
import Logging
import SwiftProtobuf
import Synchronization
import Testing

/// GetAnnouncementBanners through the real upward session (WebSocket, yamux, dRPC) to the
/// double: fetched at connect, refreshed on its interval, kept when a call fails, and a
/// control plane without the method breaks nothing.
@Suite(.timeLimit(.minutes(3)))
struct AnnouncementBannerTests {
    func makeSession(_ url: String, _ double: ControlPlaneDouble, store: AnnouncementBanners, interval: Duration) -> ControlPlaneSession {
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = .seconds(30)
        let refresh = AnnouncementBannerRefresh(store: store, interval: interval, logger: UpwardParticipantTests.quiet)
        return ControlPlaneSession(
            configuration: configuration,
            dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: UpwardParticipantTests.quiet),
            logger: UpwardParticipantTests.quiet, participants: UpwardParticipants([refresh]))
    }

    @Test func bannersAreFetchedAtConnectAndRefreshed() async throws {
        let double = ControlPlaneDouble()
        double.bannerState.withLock { $0.banners = [ControlPlaneDouble.banner("Maintenance at 5 pm"), ControlPlaneDouble.banner("off", enabled: false)] }
        let store = AnnouncementBanners()
        try await double.run { url in
            // Long enough that the first fetch is the connect's, short enough for a test.
            let session = makeSession(url, double, store: store, interval: .milliseconds(200))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { !store.current.isEmpty })
            #expect(
                store.current == [
                    AnnouncementBanner(enabled: true, message: "Maintenance at 5 pm", backgroundColor: "#004852"),
                    AnnouncementBanner(enabled: false, message: "off", backgroundColor: "#004852"),
                ])
            double.bannerState.withLock { $0.banners = [ControlPlaneDouble.banner("Upgraded")] }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { store.current.map(\.message) == ["Upgraded"] })
            #expect(double.bannerState.withLock { $0.calls } >= 2)
            session.beginShutdown()
            try await running.value
        }
    }

    /// A failing call keeps the banners and the connection; the next tick fetches again.
    @Test func aFailingCallKeepsTheLastBanners() async throws {
        let double = ControlPlaneDouble()
        double.bannerState.withLock { $0.banners = [ControlPlaneDouble.banner("first")] }
        let store = AnnouncementBanners()
        try await double.run { url in
            let session = makeSession(url, double, store: store, interval: .milliseconds(100))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { store.current.map(\.message) == ["first"] })
            let before = double.bannerState.withLock { state -> Int in
                state.failure = "database is down"
                return state.calls
            }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { double.bannerState.withLock { $0.calls } >= before + 3 })
            #expect(store.current.map(\.message) == ["first"])
            #expect(session.isConnected && session.connectionCount == 1)
            double.bannerState.withLock { state in
                state.failure = nil
                state.banners = [ControlPlaneDouble.banner("second")]
            }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { store.current.map(\.message) == ["second"] })
            #expect(session.connectionCount == 1)
            session.beginShutdown()
            try await running.value
        }
    }

    /// A control plane older than API 2.1: the call is answered Unimplemented once, the
    /// refresh ends for the session, the session goes on.
    @Test func aControlPlaneWithoutTheMethodBreaksNothing() async throws {
        let double = ControlPlaneDouble()
        double.bannerState.withLock { $0.unimplemented = true }
        let store = AnnouncementBanners()
        store.store([AnnouncementBanner(enabled: true, message: "kept")])
        try await double.run { url in
            let session = makeSession(url, double, store: store, interval: .milliseconds(50))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { double.bannerState.withLock { $0.calls } == 1 })
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { double.recorded.withLock { $0.lifecycle } == [.starting, .ready] })
            #expect(store.current.map(\.message) == ["kept"])
            #expect(session.connectionCount == 1)
            // The next session asks once again, and the first asked no more meanwhile.
            await double.dropConnections()
            #expect(
                await eventually(timeout: UpwardParticipantTests.patience) {
                    session.connectionCount == 2 && double.bannerState.withLock { $0.calls } >= 2
                })
            #expect(double.bannerState.withLock { $0.calls } == 2)
            #expect(store.current.map(\.message) == ["kept"])
            session.beginShutdown()
            try await running.value
        }
    }

    @Test func eachAnswerDecidesTheNextStep() throws {
        var answer = Coder_Agent_V2_GetAnnouncementBannersResponse()
        answer.announcementBanners = [ControlPlaneDouble.banner("hi", color: "")]
        let bytes: [UInt8] = try answer.serializedBytes()
        #expect(AnnouncementBannerRefresh.step(after: .success(bytes), failing: true) == .store([AnnouncementBanner(enabled: true, message: "hi")]))
        #expect(AnnouncementBannerRefresh.step(after: .success([0xFF]), failing: false) == .keep(warn: true))
        let failed = UpwardStreamError(.remote(code: 0, message: "boom"))
        #expect(AnnouncementBannerRefresh.step(after: .failure(failed), failing: false) == .keep(warn: true))
        #expect(AnnouncementBannerRefresh.step(after: .failure(failed), failing: true) == .keep(warn: false))
        #expect(AnnouncementBannerRefresh.step(after: .failure(UpwardStreamError(.unsupported)), failing: false) == .stop)
    }

    @Test func theStoreIsBounded() {
        let store = AnnouncementBanners()
        let long = String(repeating: "é", count: AnnouncementBanners.maxMessageBytes)
        store.store(Array(repeating: AnnouncementBanner(enabled: true, message: long), count: AnnouncementBanners.maxBanners + 5))
        #expect(store.current.count == AnnouncementBanners.maxBanners)
        #expect(store.current[0].message.utf8.count == AnnouncementBanners.maxMessageBytes)
        #expect(store.current[0].message.allSatisfy { $0 == "é" })
    }
}
