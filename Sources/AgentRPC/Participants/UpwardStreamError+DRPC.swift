import AgentCore
import DRPC
import Yamux

extension UpwardStreamError {
    /// What a dRPC call's or yamux stream's failure means to a participant. A failure while
    /// the task is cancelled is ``UpwardStreamError/Kind/cancelled`` (the stream was reset
    /// for it).
    init(_ error: any Error) {
        if Task.isCancelled || error is CancellationError {
            self.init(.cancelled, "\(error)")
            return
        }
        switch error {
        case let error as UpwardStreamError:
            self = error
        case let error as DRPCCallError:
            switch error {
            case .remote(let body):
                self.init(body.isUnsupported ? .unsupported : .remote(code: body.code, message: body.message), body.message)
            case .wire(.dataOverflow(let limit)):
                self.init(.messageTooLarge(limit: limit), error.description)
            case .wire, .protocolViolation:
                self.init(.protocolViolation, error.description)
            case .unexpectedEOF, .transport:
                self.init(.sessionEnded, error.description)
            case .closed:
                self.init(.closed, error.description)
            case .remoteClosed:
                self.init(.remoteClosed, error.description)
            }
        case let error as YamuxSessionError:
            switch error {
            case .streamClosed: self.init(.closed, error.description)
            case .protocolError: self.init(.protocolViolation, error.description)
            case .sessionClosed, .remoteGoAway, .streamReset, .pingTimeout: self.init(.sessionEnded, error.description)
            }
        default:
            self.init(.sessionEnded, "\(error)")
        }
    }
}
