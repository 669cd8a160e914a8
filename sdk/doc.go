// Package sdk is the root of the agentnode plugin SDK. Third parties build
// trust evaluators, Guard inspectors, sandbox backends and LLM brokers on the
// packages below it; the kernel talks to them through the same packages.
//
//   - sdk/plugin: handshake, API-version negotiation, Serve, parent watchdog
//   - sdk/trust, sdk/guard, sdk/sandbox, sdk/broker: one interface per plugin
//     kind (ctx + request struct → response struct), its gRPC adapter and a
//     test harness (trusttest, guardtest, sandboxtest, brokertest)
//   - sdk/proto/agentnodev1: code generated from specs/proto (make proto)
//
// Nothing under sdk/ imports kernel/, plugins/ or cmd/; a test enforces it.
package sdk
