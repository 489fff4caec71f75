"""Advantage estimators: REINFORCE with negative-sample control (``reinforce_nsc``)."""
