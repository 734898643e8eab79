import Glibc

/// A UDP socket bound to 127.0.0.1 (the kernel's port) holding that port until closed.
final class UDPPortHolder: Sendable {
    let port: UInt16
    private let descriptor: Int32

    init?() {
        let descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            Glibc.close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        self.port = UInt16(bigEndian: address.sin_port)
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}

/// A UDP port on 127.0.0.1 that was free a moment ago (bound, read back, released).
func freeUDPPort() -> UInt16? {
    guard let holder = UDPPortHolder() else { return nil }
    holder.close()
    return holder.port
}
