import AgentProto
import Foundation
import SwiftProtobuf

/// Frames and requests as boundary makes them.
public enum Boundary {
    public typealias Request = Coder_Agent_V2_ReportBoundaryLogsRequest

    public static func request(_ urls: [String], session: String = "", firstSequence: Int32 = 0, allowed: Bool = true, nanos: Int32 = 123_456_789) -> Request {
        var request = Request()
        request.sessionID = session
        request.logs = urls.enumerated().map { index, url in
            var log = Coder_Agent_V2_BoundaryLog()
            log.allowed = allowed
            log.time = Google_Protobuf_Timestamp(seconds: 1_767_225_600 + Int64(index), nanos: nanos)
            var http = Coder_Agent_V2_BoundaryLog.HttpRequest()
            http.method = "GET"
            http.url = url
            if allowed { http.matchedRule = "domain=example.invalid" }
            log.httpRequest = http
            log.sequenceNumber = firstSequence &+ Int32(truncatingIfNeeded: index)
            return log
        }
        return request
    }

    public static func frame(tag: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [tag, UInt8((payload.count >> 16) & 0xFF), UInt8((payload.count >> 8) & 0xFF), UInt8(payload.count & 0xFF)] + payload
    }

    public static func v1(_ request: Request) -> [UInt8] { frame(tag: 1, try! request.serializedBytes() as [UInt8]) }

    public static func v2(_ request: Request) -> [UInt8] {
        var message = Coder_Boundarylogproxy_Codec_V1_BoundaryMessage()
        message.logs = request
        return frame(tag: 2, try! message.serializedBytes() as [UInt8])
    }

    public static func status(channelFull: Int64, batchFull: Int64) -> [UInt8] {
        var status = Coder_Boundarylogproxy_Codec_V1_BoundaryStatus()
        status.droppedChannelFull = channelFull
        status.droppedBatchFull = batchFull
        var message = Coder_Boundarylogproxy_Codec_V1_BoundaryMessage()
        message.status = status
        return frame(tag: 2, try! message.serializedBytes() as [UInt8])
    }

    /// A TagV2 frame of `count` entries with `url`, no session.
    public static func logs(_ count: Int, url: String = "https://b.invalid/") -> [UInt8] {
        v2(request(Array(repeating: url, count: count)))
    }
}
