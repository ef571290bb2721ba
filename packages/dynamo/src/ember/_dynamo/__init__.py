"""ember-dynamo: ``ember.compile`` - capture Python bytecode into FX graphs, with guards and graph breaks.

(Work in progress: the api engineer replaces this module's body.)
"""
