"""What auditors take away: streaming record exports (NDJSON, CSV) and the signed offline audit
package (``package.audit_package_write``, re-verified by ``audit.audit_verify`` without the
database or the network)."""
