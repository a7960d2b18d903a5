"""The bug zoo: wrong and correct implementations the grader is measured against."""
