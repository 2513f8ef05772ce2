"""``mlcopilot watch``: react to DataHub's change events instead of waiting for the next scan.

A DataHub Action (:mod:`~mlcopilot.watch.action`) turns each change event into rescan requests
for the models it affects (:mod:`~mlcopilot.watch.events`, :mod:`~mlcopilot.watch.affected`),
stored in the state database; a worker (:mod:`~mlcopilot.watch.worker`) scans them as
``mlcopilot scan`` does. Needs the ``watch`` extra (``acryl-datahub-actions``); only this
package imports it.
"""
