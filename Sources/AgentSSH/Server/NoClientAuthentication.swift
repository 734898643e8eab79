import NIOCore
import NIOSSH

/// No client authentication: the `none` method succeeds for any user name, as in the
/// reference (reaching the port is the authorization: coderd authorizes the tunnel, and the
/// loopback listener is for the workspace's own user). Other methods are refused, so a
/// client that tries them first falls back to `none`.
struct NoClientAuthentication: NIOSSHServerUserAuthenticationDelegate {
    var supportedAuthenticationMethods: NIOSSHAvailableUserAuthenticationMethods { [] }
    /// Called (on the connection's loop) when the `none` method succeeds: the handshake is
    /// done, the connection no longer evictable.
    var onAuthenticated: @Sendable () -> Void = {}

    func requestReceived(
        request: NIOSSHUserAuthenticationRequest, responsePromise: EventLoopPromise<NIOSSHUserAuthenticationOutcome>
    ) {
        switch request.request {
        case .none:
            onAuthenticated()
            responsePromise.succeed(.success)
        default: responsePromise.succeed(.failure)
        }
    }
}
