import Testing
@testable import WireGuard
