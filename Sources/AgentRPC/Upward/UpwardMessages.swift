import AgentCore
import AgentProto
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import SwiftProtobuf

/// AgentCore's upward items as the Agent API's messages.
extension ControlPlaneSession {
    static func request(_ report: ConnectionReport) -> Coder_Agent_V2_ReportConnectionRequest {
        var connection = Coder_Agent_V2_Connection()
        connection.id = Data(report.id)
        connection.action = Coder_Agent_V2_Connection.Action(rawValue: report.action.rawValue) ?? .unspecified
        connection.type = Coder_Agent_V2_Connection.TypeEnum(rawValue: report.kind.rawValue) ?? .unspecified
        connection.timestamp = Google_Protobuf_Timestamp(date: report.timestamp)
        connection.ip = report.ip
        connection.statusCode = report.statusCode
        if let reason = report.reason { connection.reason = reason }
        var request = Coder_Agent_V2_ReportConnectionRequest()
        request.connection = connection
        return request
    }

    static func request(_ status: AppStatusReport) -> Coder_Agent_V2_UpdateAppStatusRequest {
        var request = Coder_Agent_V2_UpdateAppStatusRequest()
        request.slug = status.slug
        request.state = Coder_Agent_V2_UpdateAppStatusRequest.AppStatusState(rawValue: status.state.rawValue) ?? .working
        request.message = status.message
        request.uri = status.uri
        return request
    }

    static func request(_ batch: BoundaryLogBatch) -> Coder_Agent_V2_ReportBoundaryLogsRequest {
        var request = Coder_Agent_V2_ReportBoundaryLogsRequest()
        request.sessionID = batch.sessionID
        request.confinedProcessName = batch.confinedProcessName
        request.logs = batch.entries.map { entry in
            var log = Coder_Agent_V2_BoundaryLog()
            log.allowed = entry.allowed
            if let time = entry.time { log.time = Google_Protobuf_Timestamp(seconds: time.seconds, nanos: time.nanos) }
            if let http = entry.httpRequest {
                var request = Coder_Agent_V2_BoundaryLog.HttpRequest()
                request.method = http.method
                request.url = http.url
                request.matchedRule = http.matchedRule
                log.httpRequest = request
            }
            log.sequenceNumber = entry.sequenceNumber
            return log
        }
        return request
    }
}
