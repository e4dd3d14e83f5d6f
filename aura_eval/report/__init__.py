"""The report, the audit site and the paper's numbers beside ours."""
