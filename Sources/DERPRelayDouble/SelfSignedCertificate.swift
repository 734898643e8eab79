import Foundation

/// A throwaway certificate for `localhost` and 127.0.0.1 (and ::1), made with the
/// `openssl` CLI in a temporary directory: for the TLS relay in tests.
public struct SelfSignedCertificate: Sendable {
    /// The PEM certificate.
    public let certificatePath: String
    /// Its PEM private key.
    public let keyPath: String

    /// Why no certificate was made.
    public enum Failure: Error, CustomStringConvertible {
        case openssl(status: Int32)
        public var description: String {
            switch self {
            case .openssl(let status): "openssl req exited with \(status)"
            }
        }
    }

    /// Runs `openssl req -x509` (EC P-256, one day) without blocking the caller's thread.
    public static func make() async throws -> SelfSignedCertificate {
        let directory = NSTemporaryDirectory() + "derp-cert-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cert = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        guard status == 0 else { throw Failure.openssl(status: status) }
        return SelfSignedCertificate(certificatePath: cert, keyPath: key)
    }
}
