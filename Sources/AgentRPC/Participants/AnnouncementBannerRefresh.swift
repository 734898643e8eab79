import AgentCore
import AgentProto
import DRPC
import Logging
import SwiftProtobuf

/// Fetches the deployment's announcement banners on each connected session: once at once,
/// then every ``interval`` (the reference's 2 minutes), storing each answer in
/// ``AnnouncementBanners`` for SSH login shells.
///
/// A failed call keeps the banners stored before (logged as a warning once, then at debug
/// level until a call succeeds again) and is tried again at the next tick; a control plane
/// that does not serve the method (older than API 2.1) ends the refresh for this session.
public struct AnnouncementBannerRefresh: UpwardParticipant {
    static let rpc = DRPCMethodPath.agent("GetAnnouncementBanners")
    /// The reference's refresh interval.
    public static let defaultInterval: Duration = .seconds(120)
    /// A call unanswered this long is given up until the next tick.
    static let callTimeout: Duration = .seconds(30)
    /// Largest answer read: far above what ``AnnouncementBanners`` keeps (16 × 8 KiB).
    static let maxAnswerBytes = 1 << 20

    public let store: AnnouncementBanners
    public let interval: Duration
    let logger: Logger

    public var name: String { "announcement banners" }

    public init(store: AnnouncementBanners, interval: Duration = Self.defaultInterval, logger: Logger) {
        precondition(interval > .zero, "a refresh interval must be positive")
        self.store = store
        self.interval = interval
        self.logger = logger
    }

    /// What to do after one call.
    enum Step: Equatable {
        /// Store these and wait for the next tick.
        case store([AnnouncementBanner])
        /// Keep what is stored; log the failure as a warning when it is the first in a row.
        case keep(warn: Bool)
        /// The control plane has no such method: stop for this session.
        case stop
    }

    /// The step after a call's `result`; `failing` tells whether the call before failed too.
    static func step(after result: Result<[UInt8], UpwardStreamError>, failing: Bool) -> Step {
        switch result {
        case .success(let bytes):
            guard let answer = try? Coder_Agent_V2_GetAnnouncementBannersResponse(serializedBytes: bytes) else {
                return .keep(warn: !failing)
            }
            return .store(
                answer.announcementBanners.map {
                    AnnouncementBanner(enabled: $0.enabled, message: $0.message, backgroundColor: $0.backgroundColor)
                })
        case .failure(let error):
            return error.kind == .unsupported ? .stop : .keep(warn: !failing)
        }
    }

    public func run(on session: any UpwardSession) async throws {
        var failing = false
        while !Task.isCancelled {
            let result = await call(session)
            if Task.isCancelled { return }
            switch Self.step(after: result, failing: failing) {
            case .store(let banners):
                store.store(banners)
                failing = false
            case .keep(let warn):
                failing = true
                let detail = result.failure.map { "\($0)" } ?? "an answer that does not decode"
                if warn {
                    logger.warning("announcement banners not fetched; the last ones stay", metadata: ["error": "\(detail)"])
                } else {
                    logger.debug("announcement banners not fetched again", metadata: ["error": "\(detail)"])
                }
            case .stop:
                logger.info("the control plane serves no announcement banners; none are fetched on this session")
                return
            }
            try await Task.sleep(for: interval)
        }
    }

    /// One call, given up after ``callTimeout``.
    private func call(_ session: any UpwardSession) async -> Result<[UInt8], UpwardStreamError> {
        let request: [UInt8] = (try? Coder_Agent_V2_GetAnnouncementBannersRequest().serializedBytes()) ?? []
        return await withTaskGroup(of: Result<[UInt8], UpwardStreamError>?.self) { group in
            group.addTask {
                do throws(UpwardStreamError) {
                    return .success(try await session.unary(Self.rpc, request: request, maxMessageBytes: Self.maxAnswerBytes))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: Self.callTimeout)
                return nil
            }
            defer { group.cancelAll() }
            let first = await group.next() ?? nil
            return first ?? .failure(UpwardStreamError(.sessionEnded, "no answer within \(Self.callTimeout)"))
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
