import NIOCore

#if canImport(Glibc)
import Glibc
#endif

extension Channel {
    /// Closes with a reset (SO_LINGER 0): what is still queued for a client that stopped
    /// reading is dropped by the kernel at once instead of waiting, up to the socket's send
    /// buffer, for a reader that will never come.
    public func abort() {
        guard let options = self as? any SocketOptionProvider else {
            close(promise: nil)
            return
        }
        options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
            self.close(promise: nil)
        }
    }
}
